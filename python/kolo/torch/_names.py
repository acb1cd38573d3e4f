"""name=: Horovod's negotiation by name, for host calls on the global set.

A call given name= is not run when it is made: it goes into this
process's table of pending calls and returns a handle (a blocking call
then waits on it).  When a rank needs a result (synchronize or poll of
such a handle, a blocking named call) it sends a waiting record in the
control round (_join.py); then every rank, whatever its own call, gathers
every rank's pending calls (seven int64s each) and runs, in the order of
the lowest rank that is not joined, those that every rank not joined
holds: each with its same-named peers, whatever order ranks made them
in.  A joined rank replays them.  Named calls held by some ranks only
wait on.  A round in which every rank is blocked (none polls) and no
name is held everywhere fails on every rank, naming the calls waited for
and the ranks that have not made them.  Unnamed calls, calls on CUDA
tensors or on other process sets, and a job of one rank run in the
order each rank makes them, as before.  This file: the table and the
handles; _names_round.py: the rounds.
"""
import hashlib

from kolo._lib import KoloError
from kolo.torch import _comms, _join, _names_round

_pending = []  # this rank's Entry objects, in the order they were made
_cleared_at_shutdown = [False]


class Entry:
    def __init__(self, name, row, desc, issue):
        self.name, self.row, self.desc, self.issue = name, row, desc, issue
        self.handle, self.error = None, None  # the running call's Handle, or the exception that refused it

    @property
    def key(self):
        return self.row[6]


class Named:
    """The handle of a named call: runs it once every rank has made it."""

    def __init__(self, entry):
        self._entry, self._result, self._done = entry, None, False
        self._finish = lambda: entry.handle.wait()

    def _settled(self):
        if self._entry.error is not None:
            raise self._entry.error
        return self._entry.handle is not None

    def poll(self):
        if self._done:
            return True
        if not self._settled():
            wait_for(self._entry, poll=True)
        return self._settled() and self._entry.handle.poll()

    def wait(self):
        if not self._done:
            while not self._settled():
                wait_for(self._entry, poll=False)
            self._result, self._done = self._finish(), True
        return self._result


def name_key(name):
    """A name as a nonzero int64, the same in every process."""
    return int.from_bytes(hashlib.blake2b(str(name).encode(), digest_size=7).digest(), "little") + 1


def deferred(process_set, cuda):
    """Whether the named call being made goes into the pending table."""
    return (getattr(_join._named, "name", None) is not None and not cuda and process_set.process_set_id == 0
            and _comms.size() > 1 and not getattr(_join._state, "replaying", False))


def collective(kind, what, desc, process_set, issue, async_, root=-1, cuda=False):
    """A collective described by `desc` (desc[0]: async or not), made by
    issue(async_): at once after the control round, or, named, by name."""
    if not deferred(process_set, cuda):
        _join.negotiate(kind, what, desc, process_set, root=root, cuda=cuda)
        return issue(async_)
    handle = Named(_submit(kind, what, desc, root, lambda: issue(True)))
    if async_:
        return handle
    try:
        return handle.wait()
    except KoloError:
        cancel(handle._entry)  # no handle left to the caller: the call is not pending any more
        raise


def _submit(kind, what, desc, root, issue):
    name = str(_join._named.name)
    key = name_key(name)
    if any(e.key == key for e in _pending):
        raise ValueError("%s: name=%r: a call of this name is already pending on rank %d (made, not yet run): "
                         "names are unique among pending calls; synchronize it first" % (what, name, _comms.rank()))
    if not _cleared_at_shutdown[0]:
        _comms.on_shutdown(_forget)
        _cleared_at_shutdown[0] = True
    desc = [kind, 1] + list(desc[1:])  # run async whether or not the caller blocks: blocking and async forms match
    digest = hash(tuple(desc) + (0,)) & (2 ** 62 - 1)
    entry = Entry(name, [kind, digest, len(desc), _join.NAME_INDEX.get(what, -1), root, 0, key], desc, issue)
    _pending.append(entry)
    return entry


def _forget():
    _pending.clear()
    _cleared_at_shutdown[0] = False


def cancel(entry):
    if entry in _pending:
        _pending.remove(entry)


def pending_count():
    return len(_pending)


def pending():
    """This rank's pending named calls, in the order they were made."""
    return _pending


def wait_for(entry, poll):
    """Control rounds until `entry` ran or was refused (poll: one round)."""
    while entry.handle is None and entry.error is None:
        record = [_join.WAITING, entry.key, 0, entry.row[3], -1, 0, 0, len(_pending), int(poll)]
        _names_round.settle(_join.rows(_join.control_round(record)))
        if poll:
            return
