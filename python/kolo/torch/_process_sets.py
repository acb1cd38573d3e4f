"""Horovod's process sets: ProcessSet, add_process_set, remove_process_set,
global_process_set.

A process set added with add_process_set has a host communicator of its
own, split from the job's (koloCommSplit: color 0 for its ranks,
KOLO_SPLIT_NOCOLOR for the others, key the rank in the job), so adding
one is collective over every rank, as in Horovod.  Its CUDA communicator
and its non-blocking twin are split from that one at the set's first
CUDA or async call, which every rank of the set makes.  A collective
with process_set=S runs on S's communicators; ranks in it are S's own
(0..S.size()-1, in job rank order), but root_rank stays a rank of the
job, as Horovod has it.
"""
import hashlib

import torch

from kolo._lib import check, ffi, lib, macros
from kolo.torch import _comms, _names
from kolo.torch._handle import host_progress
from kolo.torch._join import BARRIER, SETUP, negotiate
from kolo.torch._placement import comm_and_stream, cuda_stream
from kolo.torch._progress import Progress

_registry = {}  # process_set_id -> the ProcessSet added with it
_next_id = [1]


class ProcessSet:
    """Ranks of the job that run collectives together (Horovod's); pass it
    to add_process_set (or init(process_sets=...)) on every rank."""

    def __init__(self, ranks):
        ranks = list(ranks)
        if not ranks or any(not isinstance(r, int) or isinstance(r, bool) for r in ranks):
            raise ValueError("kolo.torch.ProcessSet: %r is not a non-empty list of ranks (ints)" % (ranks,))
        if len(set(ranks)) != len(ranks):
            raise ValueError("kolo.torch.ProcessSet: ranks %s name a rank more than once" % sorted(ranks))
        self.ranks, self.process_set_id = sorted(ranks), None
        self._comms, self._device, self._progress, self.dropped = {}, None, None, None

    def __repr__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)

    def size(self):
        """The number of its ranks; None until it is added."""
        return None if self.process_set_id is None else len(self.ranks)

    def rank(self):
        """This process's rank within the set; None until it is added."""
        if self.process_set_id is None:
            return None
        if not self.included():
            raise ValueError("kolo.torch: rank %d is not in %r: it has no rank within it" % (_comms.rank(), self))
        return self.ranks.index(_comms.rank())

    def included(self):
        """Whether this process is one of the set's ranks."""
        return _comms.rank() in self.ranks

    # ---- what the collectives use (and _handle.run as `comms`)
    def host(self):
        return self._comms["host"]

    def comm_and_stream(self, kind, device):
        if kind == "cuda":
            return self._cuda(device), cuda_stream(device)
        return self.host(), ffi.NULL

    def _cuda(self, device):
        index = torch.cuda.current_device() if device.index is None else device.index
        with _comms._lock:
            if "cuda" not in self._comms:
                self._comms["cuda"] = _comms.split(self.host(), lib.koloMemCuda, device=index)
                self._device = index
            elif self._device != index:
                raise ValueError("kolo.torch: %r has its CUDA communicator on cuda:%d; a tensor on cuda:%d cannot "
                                 "use it (one device per process)" % (self, self._device, index))
            return self._comms["cuda"]

    def host_progress(self):
        with _comms._lock:
            if self._progress is None:
                self._comms["async"] = _comms.split(self.host(), lib.koloMemHost, blocking=0)
                self._progress = Progress(self._comms["async"])
            return self._progress

    def _destroy(self):
        for key in ("async", "cuda", "host"):
            comm = self._comms.pop(key, None)
            if comm is not None:
                _comms.destroy(comm, "process set's " + key)
        self._progress, self._device = None, None


class _GlobalProcessSet(ProcessSet):
    """Every rank of the job, on kolo.torch's own communicators."""

    def __init__(self):
        self.process_set_id = 0

    @property
    def ranks(self):
        return list(range(_comms.size()))

    def rank(self):
        return _comms.rank()

    def included(self):
        return True

    def host(self):
        return _comms.world()

    def comm_and_stream(self, kind, device):
        return comm_and_stream(kind, device)

    def host_progress(self):
        return host_progress()


global_process_set = _GlobalProcessSet()


def member(process_set, what):
    """The added process set a call of this rank runs on, or a sentence."""
    ps = global_process_set if process_set is None else process_set
    if not isinstance(ps, ProcessSet):
        raise TypeError("%s: process_set is a %s, not a kolo.torch.ProcessSet" % (what, type(ps).__name__))
    if ps is global_process_set:
        _comms.world()
        return ps
    if ps.process_set_id is None or _registry.get(ps.process_set_id) is not ps:
        if getattr(ps, "dropped", None):
            raise ValueError("%s: %r was dropped at kolo.torch.elastic's reset: %s" % (what, ps, ps.dropped))
        raise ValueError("%s: %r is not added: every rank adds it with kolo.torch.add_process_set first" % (what, ps))
    if not ps.included():
        raise ValueError("%s: rank %d is not in process set %d (ranks %s): only its ranks may call a collective "
                         "with it" % (what, _comms.rank(), ps.process_set_id, ps.ranks))
    return ps


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has called barrier(): a one-byte
    all-reduce on its host communicator."""
    ps = member(process_set, "kolo.torch.barrier")
    negotiate(BARRIER, "kolo.torch.barrier", [], ps)
    comm = ps.host()
    one = ffi.new("uint8_t[1]")
    check(lib.koloAllReduce(one, one, 1, lib.koloUint8, lib.koloMax, comm, ffi.NULL), comm, "kolo.torch.barrier")


def _same_everywhere(ps, what):
    """Every rank adds the same ranks as the same set: one all-gather of a digest."""
    digest = hashlib.sha256(repr((_next_id[0], ps.ranks)).encode()).digest()[:7]
    mine = torch.tensor([int.from_bytes(digest, "little")], dtype=torch.int64)
    every = torch.empty(_comms.size(), dtype=torch.int64)
    comm = _comms.world()
    check(lib.koloAllGather(ffi.cast("void *", mine.data_ptr()), ffi.cast("void *", every.data_ptr()), 1,
                            lib.koloInt64, comm, ffi.NULL), comm, what)
    differ = [r for r, d in enumerate(every.tolist()) if d != mine.item()]
    if differ:
        raise ValueError("%s: ranks %s add another process set than this rank's %s: every rank adds the same sets, "
                         "in the same order" % (what, differ, ps.ranks))


def _check_new(ps, what):
    size = _comms.size()
    if ps.ranks[0] < 0 or ps.ranks[-1] >= size:
        raise ValueError("%s: ranks %s are not all ranks of this job (0..%d)" % (what, ps.ranks, size - 1))
    if ps.process_set_id is not None:
        raise ValueError("%s: %r is added already" % (what, ps))
    same = [s for s in _registry.values() if s.ranks == ps.ranks]
    if same:
        raise ValueError("%s: a process set of ranks %s is added already (id %d)" % (what, ps.ranks,
                                                                                    same[0].process_set_id))


def add_process_set(process_set):
    """Adds a ProcessSet (or one of the ranks given) and returns it.
    Collective: every rank of the job calls it, with the same ranks, and
    adds its sets in the same order."""
    what = "kolo.torch.add_process_set"
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    negotiate(SETUP, what, [], global_process_set)
    _same_everywhere(ps, what)  # first: ranks that differ are said so on every rank
    _check_new(ps, what)
    _register(ps, _next_id[0])
    _next_id[0] += 1
    return ps


def _register(ps, process_set_id):
    """ps as set process_set_id: its host communicator split from the job's
    (collective: every rank of the job, in the same order)."""
    color = 0 if ps.included() else macros["KOLO_SPLIT_NOCOLOR"]
    comm = _comms.split(_comms.world(), lib.koloMemHost, color=color)
    ps._comms = {"host": comm} if comm is not None else {}
    ps.process_set_id, ps.dropped = process_set_id, None
    _registry[process_set_id] = ps
    _comms.on_shutdown(lambda: _drop(ps))


def added():
    """The added sets (not the global one), by id, and the next id."""
    return [_registry[i] for i in sorted(_registry)], _next_id[0]


def carry(table, next_id, known):
    """kolo.torch.elastic's reset: the sets of `table` ([(id, ranks)], in
    id order; rank 0's, the same on every rank) added again over the new
    job's ranks, keeping their ids: the objects in `known` (id -> set)
    where this process had them, new ones where not (a worker that just
    joined).  Collective, as add_process_set."""
    for process_set_id, ranks in table:
        ps = known.get(process_set_id) or ProcessSet(ranks)
        ps.ranks = sorted(ranks)
        _register(ps, process_set_id)
    _next_id[0] = next_id


def _drop(ps):
    if _registry.get(ps.process_set_id) is ps:
        del _registry[ps.process_set_id]
        _names.forget_set(ps)
        ps._destroy()
        ps.process_set_id = None


def remove_process_set(process_set):
    """Removes an added process set, destroying its communicators; True if
    it was removed (the global set is not: False).  Every rank calls it,
    as Horovod asks; the set may be added again afterwards."""
    if process_set is global_process_set:
        return False
    if not isinstance(process_set, ProcessSet) or _registry.get(process_set.process_set_id) is not process_set:
        raise ValueError("kolo.torch.remove_process_set: %r is not an added process set" % (process_set,))
    _drop(process_set)
    return True
