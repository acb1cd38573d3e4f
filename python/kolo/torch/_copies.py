"""allgather, broadcast, alltoall (and async forms): copies, so any dtype
moves as its bytes.  Ranks may give allgather different first
dimensions and alltoall uneven splits: the sizes are exchanged first on
the host communicator, and the data moves in blocks padded to the
largest (kolo's calls take one count on every rank).  With a process
set, ranks are the set's own, but root_rank is a rank of the job."""
import math

import torch

from kolo._lib import check, ffi, lib
from kolo.torch import _comms
from kolo.torch._dtypes import as_bytes
from kolo.torch._handle import run
from kolo.torch._join import ALLGATHER, ALLTOALL, BROADCAST, takes_name, tensors_desc
from kolo.torch._names import collective
from kolo.torch._placement import memory_kind, ptr
from kolo.torch._process_sets import global_process_set, member
from kolo.torch._reduce import single, grouped


def _exchange_sizes(values, what, ps):
    """Every rank's list of ints (the same length on every rank): an
    int64 [size, len] tensor gathered over the set's host communicator."""
    mine = torch.tensor(values, dtype=torch.int64)
    out = torch.empty((ps.size(), len(values)), dtype=torch.int64)
    comm = ps.host()
    check(lib.koloAllGather(ptr(mine), ptr(out), len(values), lib.koloInt64, comm, ffi.NULL), comm, what)
    return out


def _rows_shape(tensor, rows):
    return (rows,) + tuple(tensor.shape[1:])


def _gather_rows(tensors, what, ps):
    """Each tensor at least 1-D, and every rank's rows of it: one exchange
    of sizes for all the tensors of the call."""
    flat = [t.reshape(1) if t.dim() == 0 else t for t in tensors]
    row = [math.prod(t.shape[1:]) for t in flat]
    sizes = _exchange_sizes([v for t, r in zip(flat, row) for v in (t.shape[0], r)], what, ps)
    for i, r in enumerate(row):
        if (sizes[:, 2 * i + 1] != r).any():
            raise ValueError("%s: ranks' tensors differ beyond the first dimension (tensor %d, elements per row: "
                             "%s)" % (what, i, sizes[:, 2 * i + 1].tolist()))
    return flat, [sizes[:, 2 * i].tolist() for i in range(len(flat))]


class _Gather:
    """One tensor of an allgather: sent in a block padded to the most rows."""

    def __init__(self, tensor, rows, me):
        self.rows, self.most = rows, max(rows)
        self.send = torch.zeros(_rows_shape(tensor, self.most), dtype=tensor.dtype, device=tensor.device)
        self.send[:rows[me]] = tensor
        self.recv = torch.empty(_rows_shape(tensor, self.most * len(rows)), dtype=tensor.dtype, device=tensor.device)
        self.nbytes = self.send.numel() * self.send.element_size()

    def call(self, stream):
        def one(comm):
            return lib.koloAllGather(ptr(as_bytes(self.send)), ptr(as_bytes(self.recv)), self.nbytes, lib.koloUint8,
                                     comm, stream)
        return one

    def result(self):
        if all(r == self.most for r in self.rows):
            return self.recv
        return torch.cat([self.recv[i * self.most:i * self.most + r] for i, r in enumerate(self.rows)])


def _allgather(tensors, async_, what, process_set):
    ps = member(process_set, what)
    kind, device = memory_kind(tensors, what) if tensors else ("host", None)
    desc = [int(async_)] + tensors_desc(tensors, first_dim=0)
    return collective(ALLGATHER, what, desc, ps, lambda a: _gather(tensors, a, what, ps, kind, device), async_,
                      cuda=kind == "cuda")


def _gather(tensors, async_, what, ps, kind, device):
    flat, rows = _gather_rows(tensors, what, ps) if tensors else ([], [])
    parts = [_Gather(t, r, ps.rank()) for t, r in zip(flat, rows)]

    def call(comm, stream):
        return grouped([p.call(stream) for p in parts if p.nbytes], [], comm)

    return run(kind, device, call, what, lambda: [p.result() for p in parts], parts, async_, ps)


@takes_name
def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's tensor, concatenated along the first dimension (which may
    differ between ranks; the other dimensions may not)."""
    return single(_allgather([tensor], False, "kolo.torch.allgather", process_set), False)


@takes_name
def allgather_async(tensor, name=None, process_set=global_process_set):
    return single(_allgather([tensor], True, "kolo.torch.allgather_async", process_set), True)


@takes_name
def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor (first dimensions may differ between ranks),
    issued as one kolo group; a list."""
    return _allgather(list(tensors), False, "kolo.torch.grouped_allgather", process_set)


@takes_name
def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    return _allgather(list(tensors), True, "kolo.torch.grouped_allgather_async", process_set)


def _root(ps, root_rank, what):
    """root_rank (a rank of the job) as a rank of the set."""
    if ps is global_process_set and not 0 <= root_rank < _comms.size():
        raise ValueError("%s: root_rank %d is not a rank of this job (0..%d)" % (what, root_rank, _comms.size() - 1))
    if root_rank not in ps.ranks:
        raise ValueError("%s: root_rank %d is not in process set %d (ranks %s); root_rank is a rank of the job"
                         % (what, root_rank, ps.process_set_id, ps.ranks))
    return ps.ranks.index(root_rank)


def _broadcast(tensor, root_rank, inplace, async_, what, process_set):
    ps = member(process_set, what)
    kind, device = memory_kind([tensor], what)
    root = _root(ps, root_rank, what)
    desc = [int(async_), root_rank] + tensors_desc([tensor])
    return collective(BROADCAST, what, desc, ps, lambda a: _send(tensor, root, inplace, a, what, ps, kind, device),
                      async_, root=root_rank, cuda=kind == "cuda")


def _send(tensor, root, inplace, async_, what, ps, kind, device):
    out = tensor if inplace else tensor.clone(memory_format=torch.contiguous_format)
    work = out if out.is_contiguous() else out.contiguous()
    nbytes = work.numel() * work.element_size()

    def call(comm, stream):
        if nbytes == 0:
            return lib.koloSuccess
        buf = ptr(as_bytes(work))
        return lib.koloBroadcast(buf, buf, nbytes, lib.koloUint8, root, comm, stream)

    def finish():
        if work is not out:
            out.copy_(work)
        return out

    return run(kind, device, call, what, finish, (out, work), async_, ps)


@takes_name
def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """A new tensor holding root_rank's `tensor`."""
    return _broadcast(tensor, root_rank, False, False, "kolo.torch.broadcast", process_set)


@takes_name
def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites `tensor` with root_rank's, in place; returns it."""
    return _broadcast(tensor, root_rank, True, False, "kolo.torch.broadcast_", process_set)


@takes_name
def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    return _broadcast(tensor, root_rank, False, True, "kolo.torch.broadcast_async", process_set)


@takes_name
def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    return _broadcast(tensor, root_rank, True, True, "kolo.torch.broadcast_async_", process_set)


def _split_sizes(tensor, splits, what, n):
    if splits is None:
        if tensor.shape[0] % n:
            raise ValueError("%s: the first dimension (%d) does not divide among %d ranks: pass splits" %
                             (what, tensor.shape[0], n))
        return [tensor.shape[0] // n] * n
    splits = [int(s) for s in (splits.tolist() if torch.is_tensor(splits) else splits)]
    if len(splits) != n or min(splits) < 0 or sum(splits) != tensor.shape[0]:
        raise ValueError("%s: splits %s must be %d non-negative sizes adding up to the first dimension (%d)" %
                         (what, splits, n, tensor.shape[0]))
    return splits


def _alltoall(tensor, splits, async_, what, process_set):
    ps = member(process_set, what)
    kind, device = memory_kind([tensor], what)
    sizes = _split_sizes(tensor, splits, what, ps.size())
    desc = [int(async_)] + tensors_desc([tensor], first_dim=0)
    return collective(ALLTOALL, what, desc, ps, lambda a: _exchange(tensor, sizes, splits, a, what, ps, kind, device),
                      async_, cuda=kind == "cuda")


def _exchange(tensor, sizes, splits, async_, what, ps, kind, device):
    n, me = ps.size(), ps.rank()
    matrix = _exchange_sizes(sizes, what, ps)  # [sender, receiver]: rows sent
    received = matrix[:, me].tolist()
    most = int(matrix.max())
    send = torch.zeros(_rows_shape(tensor, most * n), dtype=tensor.dtype, device=tensor.device)
    start = 0
    for j, s in enumerate(sizes):
        send[j * most:j * most + s] = tensor[start:start + s]
        start += s
    recv = torch.empty_like(send)
    block = most * (send[0].numel() if len(send) else 0) * send.element_size()

    def call(comm, stream):
        if block == 0:
            return lib.koloSuccess
        return lib.koloAlltoAll(ptr(as_bytes(send)), ptr(as_bytes(recv)), block, lib.koloUint8, comm, stream)

    def finish():
        out = torch.cat([recv[i * most:i * most + r] for i, r in enumerate(received)])
        return out if splits is None else (out, torch.tensor(received, dtype=torch.int64))

    return run(kind, device, call, what, finish, (send, recv), async_, ps)


@takes_name
def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Block j of the first dimension goes to rank j (splits: the rows of
    each block, else equal blocks); returns the blocks received, in rank
    order, concatenated, and with splits also the rows received from each."""
    return _alltoall(tensor, splits, False, "kolo.torch.alltoall", process_set)


@takes_name
def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    return _alltoall(tensor, splits, True, "kolo.torch.alltoall_async", process_set)
