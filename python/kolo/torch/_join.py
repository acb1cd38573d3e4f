"""join(): Horovod's answer to uneven data.  A rank that ran out of data
calls join(); until every rank has, it takes part in the collectives the
others still make: zeros in an allreduce (Average still divides by the
job's size), no rows in an allgather, a receiver in a broadcast, its part
of a barrier, zero gradients in a DistributedOptimizer's step.

How a joined rank learns the others' calls: every collective of
kolo.torch on the global process set starts with a control round, one
koloAllGather of a record of RECORD int64s per rank on the job's host
communicator:

    [kind, digest, description length, call name, root, CUDA, name,
     pending named calls, polling]

kind is the call's family (allreduce, allgather, ...), JOINED or
WAITING; digest a hash of the call's description (dtypes, shapes, op,
factors, root, blocking or not); a joined rank sends [JOINED, fresh, 0,
name, -1, 0, 0], fresh being 1 in its first round.  name is a CRC-32 of
the name= of a call on CUDA tensors (0: none; named host calls are
negotiated by name, _names.py): two such callers whose names differ
fail at once, on every rank, with a sentence naming both names (a
second round gathers them).  A rank waiting for a named call sends
[WAITING, its name's key, 0, call name, -1, 0, 0, pending, polling]:
then every rank settles the named calls (_names_round.settle) and makes the
round again.  Every rank reads the same table, so every rank reaches
the same verdict without another message:
  - callers of different kinds or digests: a mismatch, raised on every
    rank (joined ones too) with a sentence naming both calls;
  - every rank joined: join() returns, on every rank, the highest rank
    among those that joined in that last round;
  - callers agree and some rank joined: the lowest caller broadcasts the
    description (int64s) and the joined ranks replay the call with
    neutral tensors through the same code, which therefore makes the same
    kolo calls in the same order;
  - a call that cannot run with a joined rank (reducescatter, alltoall,
    a broadcast from a joined root, CUDA tensors, making communicators):
    its callers raise a sentence naming it; joined ranks wait on.
A job of one rank makes no round.  Calls on another process set make
their round among the set's ranks, on the set's host communicator (its
table's rows are the set's ranks, in order; sentences name job ranks):
no rank of a set is ever joined (join covers the global set), so there
the round matches calls and settles named ones only.
"""
import functools
import inspect
import struct
import threading
import zlib

import torch

from kolo._lib import KoloError, check, ffi, lib

from kolo.torch import _comms, _names, _names_round

RECORD = 9
NAME_BYTES = 64  # of a call's name= in the sentence of a mismatch of names
JOINED, ALLREDUCE, ALLGATHER, BROADCAST, REDUCESCATTER, ALLTOALL, BARRIER, STEP, SETUP, WAITING = range(1, 11)
_FAMILY = {ALLREDUCE: "an allreduce", ALLGATHER: "an allgather", BROADCAST: "a broadcast",
           REDUCESCATTER: "a reducescatter", ALLTOALL: "an alltoall", BARRIER: "a barrier",
           STEP: "a DistributedOptimizer step", SETUP: "a call that makes communicators"}
_RUNS_JOINED = (ALLREDUCE, ALLGATHER, BROADCAST, BARRIER, STEP)

# the names a record carries (an index), for sentences
NAMES = tuple("kolo.torch." + n for n in (
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "grouped_allreduce", "grouped_allreduce_",
    "grouped_allreduce_async", "grouped_allreduce_async_", "reducescatter", "reducescatter_async",
    "grouped_reducescatter", "grouped_reducescatter_async", "allgather", "allgather_async", "grouped_allgather",
    "grouped_allgather_async", "broadcast", "broadcast_", "broadcast_async", "broadcast_async_", "alltoall",
    "alltoall_async", "barrier", "DistributedOptimizer", "DistributedOptimizer.step", "add_process_set", "join"))
NAME_INDEX = {n: i for i, n in enumerate(NAMES)}

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
          torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128)
_DTYPE_CODE = {d: i for i, d in enumerate(DTYPES)}

_state = threading.local()
_optimizers = []  # DistributedOptimizers of the global set, in the (collective) order they were made
_buffers = {}


def dtype_code(dtype):
    return _DTYPE_CODE.get(dtype, -1)


def tensors_desc(tensors, first_dim=None):
    """[count, (dtype, ndim, *shape) per tensor]; first_dim replaces every
    first dimension (allgather: ranks' first dimensions may differ)."""
    out = [len(tensors)]
    for t in tensors:
        shape = list(t.shape)
        if first_dim is not None:
            shape = [first_dim] + shape[1:] if shape else [first_dim]
        out += [dtype_code(t.dtype), len(shape)] + shape
    return out


def read_tensors(desc, at):
    """(tensors of desc[at:] (tensors_desc's layout), the index after them)."""
    count, at, out = desc[at], at + 1, []
    for _ in range(count):
        code, ndim = desc[at], desc[at + 1]
        if not 0 <= code < len(DTYPES):
            raise KoloError(lib.koloInvalidUsage, "kolo.torch.join: the others call a collective on a tensor of a "
                                                  "dtype a joined rank cannot make")
        shape = desc[at + 2:at + 2 + ndim]
        out.append(torch.zeros(shape, dtype=DTYPES[code]))
        at += 2 + ndim
    return out, at


def float_bits(x):
    """A factor as an int64: its IEEE bits, or -1 for 1.0 (the common case, and a NaN's bits: refused)."""
    return -1 if x == 1.0 else struct.unpack("<q", struct.pack("<d", float(x)))[0]


def bits_float(b):
    return 1.0 if b == -1 else struct.unpack("<d", struct.pack("<q", b))[0]


# ---- the control round --------------------------------------------------
def the_set(process_set):
    """The process set a round runs on (None: the global one)."""
    if process_set is not None:
        return process_set
    from kolo.torch._process_sets import global_process_set
    return global_process_set


def job_rank(process_set, r):
    """Row r of a round's table as a rank of the job (for sentences)."""
    return r if process_set is None or process_set.process_set_id == 0 else process_set.ranks[r]


def control_round(record, process_set=None):
    """Every rank's record: one koloAllGather on the set's host communicator
    (the job's for the global set)."""
    ps = the_set(process_set)
    n = len(ps.ranks)
    if n not in _buffers:
        _buffers[n] = (ffi.new("int64_t[%d]" % RECORD), ffi.new("int64_t[%d]" % (RECORD * n)))
    mine, every = _buffers[n]
    mine[0:RECORD] = record
    comm = ps.host()
    check(lib.koloAllGather(mine, every, RECORD, lib.koloInt64, comm, ffi.NULL), comm, "kolo.torch (control round)")
    return ffi.unpack(every, RECORD * n)


def rows(flat):
    return [flat[r:r + RECORD] for r in range(0, len(flat), RECORD)]


_named = threading.local()


def takes_name(fn):
    """Decorates a public call with a name= argument: negotiate() reads it."""
    params = list(inspect.signature(fn).parameters)
    at = params.index("name")

    @functools.wraps(fn)
    def call(*args, **kwargs):
        _named.name = kwargs["name"] if "name" in kwargs else args[at] if len(args) > at else None
        try:
            return fn(*args, **kwargs)
        finally:
            _named.name = None
    return call


def _name_code(name):
    return 0 if name is None else zlib.crc32(str(name).encode()) + 1


def call_name(row):
    return NAMES[row[3]] if 0 <= row[3] < len(NAMES) else "a kolo.torch call"


def mismatch(table, callers, name=None, process_set=None):
    """The sentence when callers' rows differ (name: the name= they share), or None."""
    first, label = table[callers[0]], "" if name is None else "(name=%r)" % name
    a = job_rank(process_set, callers[0])
    rule = ("every rank makes the same collective calls in the same order" if name is None else
            "calls of one name are the same call on every rank")
    for r in callers[1:]:
        row = table[r]
        if row[0] != first[0]:
            return ("kolo.torch: calls do not match: rank %d calls %s%s and rank %d calls %s%s; %s"
                    % (a, call_name(first), label, job_rank(process_set, r), call_name(row), label, rule))
        if row[1] != first[1]:
            return ("kolo.torch: calls do not match: rank %d's %s%s and rank %d's %s%s differ in their tensors' "
                    "dtypes or shapes, op, factors, root or blocking"
                    % (a, call_name(first), label, job_rank(process_set, r), call_name(row), label))
    return None


def refusal(table, callers, joined):
    row = table[callers[0]]
    cuda = row[5]
    who = "rank%s %s joined (kolo.torch.join)" % ("s" if len(joined) > 1 else "", ", ".join(map(str, joined)))
    if row[0] not in _RUNS_JOINED:
        return ("%s: %s; %s cannot run while a rank is joined: make it before join(), or after join() returned "
                "on every rank" % (call_name(row), who, _FAMILY.get(row[0], "this call")))
    if cuda:
        return ("%s: %s; a joined rank answers calls on host tensors only, not on CUDA tensors" % (call_name(row), who))
    if row[0] == BROADCAST and row[4] in joined:
        return "%s: root_rank %d joined (kolo.torch.join): a broadcast needs its root" % (call_name(row), row[4])
    return None


def _names_differ(table, callers):
    """The first two callers whose name= differ (both given), or None."""
    named = [r for r in callers if table[r][6] != 0]
    for r in named[1:]:
        if table[r][6] != table[named[0]][6]:
            return named[0], r
    return None


def _names_sentence(table, pair, own, ps):
    """Every rank's name= (a second round, which every rank makes: the
    table is the same everywhere), in the sentence of the mismatch."""
    n = len(ps.ranks)
    mine, every = ffi.new("char[%d]" % NAME_BYTES), ffi.new("char[%d]" % (NAME_BYTES * n))
    raw = ("" if own is None else str(own)).encode()[:NAME_BYTES - 1]
    ffi.memmove(mine, raw, len(raw))
    comm = ps.host()
    check(lib.koloAllGather(mine, every, NAME_BYTES, lib.koloUint8, comm, ffi.NULL), comm,
          "kolo.torch (the names of calls that do not match)")
    names = [ffi.string(every + r * NAME_BYTES, NAME_BYTES).decode(errors="replace") for r in range(n)]
    a, b = pair
    return ("kolo.torch: calls do not match: rank %d calls %s(name=%r) and rank %d calls %s(name=%r); calls on "
            "CUDA tensors run in the order each rank makes them, not reordered by name: make them in the same "
            "order on every rank" % (job_rank(ps, a), call_name(table[a]), names[a], job_rank(ps, b),
                                     call_name(table[b]), names[b]))


def _verdict(table, own_name=None, ps=None):
    """(callers, joined, mismatch sentence or None); the same on every rank."""
    joined = [r for r, row in enumerate(table) if row[0] == JOINED]
    callers = [r for r, row in enumerate(table) if row[0] != JOINED]
    if not callers:
        return callers, joined, None
    pair = _names_differ(table, callers)
    if pair is not None:
        return callers, joined, _names_sentence(table, pair, own_name, the_set(ps))
    return callers, joined, mismatch(table, callers, process_set=ps)


def negotiate(kind, what, desc, process_set, root=-1, cuda=False):
    """The control round before a collective (`desc`: ints describing it,
    as its replay reads them).  Returns once the call may run; raises a
    sentence when ranks call different collectives or one that cannot run
    with a joined rank."""
    if len(process_set.ranks) == 1 or getattr(_state, "replaying", False):
        return
    desc = [kind] + list(desc)
    digest = hash(tuple(desc) + (int(cuda),)) & (2 ** 62 - 1)  # ints hash alike in every process of one Python
    own = getattr(_named, "name", None)
    record = [kind, digest, len(desc), NAME_INDEX.get(what, -1), root, int(cuda), _name_code(own)]
    while True:
        flat = control_round(record + [_names.pending_count(process_set), 0], process_set)
        n = len(flat) // RECORD
        same = flat[0::RECORD].count(kind) == n and flat[1::RECORD].count(digest) == n
        if same and len(set(flat[6::RECORD]) - {0}) <= 1:
            return  # every rank makes this call: the common case
        table = rows(flat)
        if not _names_round.settle_if_waiting(table, process_set):
            break
    callers, joined, wrong = _verdict(table, own, process_set)
    if wrong:
        raise KoloError(lib.koloInvalidUsage, wrong)
    if joined:
        refused = refusal(table, callers, joined)
        if refused:
            raise KoloError(lib.koloInvalidUsage, refused)
        send_desc(desc, callers[0])


def send_desc(desc, root):
    """The lowest caller's description, to every rank (joined ranks replay it)."""
    buf = torch.tensor(desc, dtype=torch.int64)
    comm = _comms.world()
    check(lib.koloBroadcast(ffi.cast("void *", buf.data_ptr()), ffi.cast("void *", buf.data_ptr()), len(desc),
                            lib.koloInt64, root, comm, ffi.NULL), comm, "kolo.torch.join (a call's description)")
    return buf.tolist()


# ---- the joined rank ----------------------------------------------------
def register_optimizer(opt):
    """A DistributedOptimizer of the global set: its index (every rank makes them in the same order)."""
    if not _optimizers:
        _comms.on_shutdown(_optimizers.clear)  # indices start again after a new init()
    _optimizers.append(opt)
    return len(_optimizers) - 1


def join(device=-1):
    """Says this rank has no more data: until every rank has joined, it
    takes part in the collectives the others make (zeros in allreduces,
    no rows in allgathers, zero gradients in DistributedOptimizer steps).
    Returns the rank that joined last, on every rank.  Host tensors
    only (device -1)."""
    from kolo.torch._process_sets import member

    member(None, "kolo.torch.join")
    if device not in (-1, None, "cpu") and not (isinstance(device, torch.device) and device.type == "cpu"):
        raise ValueError("kolo.torch.join: device=%r: a joined rank answers calls on host tensors only (device=-1)"
                         % (device,))
    for opt in _optimizers:
        if opt._fusion.step_open:
            raise RuntimeError("kolo.torch.join: a DistributedOptimizer has gradients of a step not taken: call "
                               "step() (or synchronize()) before join()")
    if _comms.size() == 1:
        return 0
    if _names.pending_count():
        raise RuntimeError("kolo.torch.join: this rank has named calls not run yet (made with name=, not "
                           "synchronized): synchronize them before join()")
    fresh = 1
    while True:
        table = rows(control_round([JOINED, fresh, 0, NAME_INDEX["kolo.torch.join"], -1, 0, 0, 0, 0]))
        fresh = 0
        if _names_round.settle_if_waiting(table, None):
            continue
        callers, joined, wrong = _verdict(table)
        if wrong:
            raise KoloError(lib.koloInvalidUsage, wrong)
        if not callers:
            return max(r for r in joined if table[r][1] == 1)
        if refusal(table, callers, joined) is None:  # else the callers raise it, and this rank waits on
            replay(send_desc([0] * table[callers[0]][2], callers[0]))


def replay(desc):
    """This joined rank's part in the call `desc` describes: the call
    itself, made with neutral tensors through the same code (no round)."""
    from kolo.torch import _copies, _ops_names, _process_sets, _reduce

    ps = _process_sets.global_process_set
    kind, what = desc[0], "kolo.torch.join"
    _state.replaying = True
    try:
        if kind == ALLREDUCE:
            async_, op, pre, post = desc[1], _ops_names.op_of(desc[2]), bits_float(desc[3]), bits_float(desc[4])
            tensors, _ = read_tensors(desc, 5)
            out = _reduce._issue(tensors, op, True, async_, what, comms=ps, scales=(pre, post))
        elif kind == ALLGATHER:
            out = _copies._allgather(read_tensors(desc, 2)[0], desc[1], what, ps)
        elif kind == BROADCAST:
            out = _copies._broadcast(read_tensors(desc, 3)[0][0], desc[2], True, desc[1], what, ps)
        elif kind == BARRIER:
            out = _process_sets.barrier()
        else:  # STEP
            out = _optimizers[desc[1]]._join_step()
        if hasattr(out, "wait"):
            out.wait()
    finally:
        _state.replaying = False
