"""name=: Horovod's negotiation by name, for host calls on any process set.

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
and the ranks that have not made them.  A process set other than the
global one does the same among its ranks: its rounds run on its host
communicator, over its pending calls (a name is unique within a set).
Unnamed calls, calls on CUDA tensors, and a set of one rank run in the
order each rank makes them, as before.  This file: the table and the
handles; _names_round.py: the rounds.
"""
import hashlib

from kolo._lib import KoloError
from kolo.torch import _comms, _join, _names_round

_pending = []  # this rank's Entry objects, in the order they were made
_cleared_at_shutdown = [False]


class Entry:
    def __init__(self, name, row, desc, issue, process_set):
        self.name, self.row, self.desc, self.issue, self.ps = name, row, desc, issue, process_set
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
    return (getattr(_join._named, "name", None) is not None and not cuda and len(process_set.ranks) > 1
            and not getattr(_join._state, "replaying", False))


def collective(kind, what, desc, process_set, issue, async_, root=-1, cuda=False):
    """A collective described by `desc` (desc[0]: async or not), made by
    issue(async_): at once after the control round, or, named, by name."""
    if not deferred(process_set, cuda):
        _join.negotiate(kind, what, desc, process_set, root=root, cuda=cuda)
        return issue(async_)
    handle = Named(_submit(kind, what, desc, root, lambda: issue(True), process_set))
    if async_:
        return handle
    try:
        return handle.wait()
    except KoloError:
        cancel(handle._entry)  # no handle left to the caller: the call is not pending any more
        raise


def _submit(kind, what, desc, root, issue, process_set):
    name = str(_join._named.name)
    key = name_key(name)
    if any(e.key == key for e in pending(process_set)):
        raise ValueError("%s: name=%r: a call of this name is already pending on rank %d%s (made, not yet run): "
                         "names are unique among a process set's pending calls; synchronize it first"
                         % (what, name, _comms.rank(), _in_set(process_set)))
    if not _cleared_at_shutdown[0]:
        _comms.on_shutdown(_forget)
        _cleared_at_shutdown[0] = True
    desc = [kind, 1] + list(desc[1:])  # run async whether or not the caller blocks: blocking and async forms match
    digest = hash(tuple(desc) + (0,)) & (2 ** 62 - 1)
    entry = Entry(name, [kind, digest, len(desc), _join.NAME_INDEX.get(what, -1), root, 0, key], desc, issue,
                  process_set)
    _pending.append(entry)
    return entry


def _in_set(process_set):
    return "" if process_set.process_set_id == 0 else " in process set %d" % process_set.process_set_id


def _forget():
    _pending.clear()
    _cleared_at_shutdown[0] = False


def forget_set(process_set):
    """A removed set's pending calls: they will not run (the set is gone)."""
    _pending[:] = [e for e in _pending if e.ps is not process_set]


def cancel(entry):
    if entry in _pending:
        _pending.remove(entry)


def pending_count(process_set=None):
    """This rank's pending named calls: on the set, or on every set (None)."""
    return len(_pending) if process_set is None else len(pending(process_set))


def pending(process_set):
    """This rank's pending named calls on the set, in the order they were made."""
    return [e for e in _pending if e.ps is process_set]


def wait_for(entry, poll):
    """Control rounds until `entry` ran or was refused (poll: one round)."""
    while entry.handle is None and entry.error is None:
        record = [_join.WAITING, entry.key, 0, entry.row[3], -1, 0, 0, pending_count(entry.ps), int(poll)]
        _names_round.settle(_join.rows(_join.control_round(record, entry.ps)), entry.ps)
        if poll:
            return
