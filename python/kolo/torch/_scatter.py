"""reducescatter, grouped_reducescatter and their async forms, as Horovod
has them: every rank gives a tensor of the same shape, reduced over the
ranks (Sum or Average); the first dimension is split among the ranks,
rows // size each and one more for each of the first rows % size ranks,
and each rank gets its part.  kolo's koloReduceScatter takes one count on
every rank: uneven parts travel in blocks padded to the largest.  With a
process set, "the ranks" are the set's, in their order."""
import torch

from kolo._lib import lib
from kolo.torch._dtypes import KOLO_TYPES, reducible, restored
from kolo.torch._handle import run
from kolo.torch._join import REDUCESCATTER, float_bits, takes_name, tensors_desc
from kolo.torch._names import collective
from kolo.torch._ops_names import Average, Sum, op_name
from kolo.torch._placement import memory_kind, ptr
from kolo.torch._process_sets import global_process_set, member
from kolo.torch._reduce import single, grouped
from kolo.torch._scale import Scaling


def split_rows(rows, n):
    """Each rank's rows of a first dimension of `rows` (Horovod's split)."""
    return [rows // n + (1 if r < rows % n else 0) for r in range(n)]


def _padded(tensor, counts):
    """`tensor`'s rows in len(counts) blocks of counts[0] rows: block r
    holds rank r's rows, then zeros."""
    most = counts[0]
    if all(c == most for c in counts):
        return tensor.contiguous()
    send = torch.zeros((most * len(counts),) + tuple(tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    start = 0
    for r, c in enumerate(counts):
        send[r * most:r * most + c] = tensor[start:start + c]
        start += c
    return send


class _Part:
    def __init__(self, tensor, op, scales, what, ps):
        if tensor.dim() == 0:
            raise ValueError("%s: a 0-dimensional tensor has no first dimension to split among the ranks" % what)
        counts = split_rows(tensor.shape[0], ps.size())
        self.dtype, self.rows = tensor.dtype, counts[ps.rank()]
        self.send, _ = reducible(_padded(tensor, counts), op, what)
        self.recv = torch.empty((counts[0],) + tuple(self.send.shape[1:]), dtype=self.send.dtype,
                                device=tensor.device)
        self.scaling = Scaling(op, tensor.dtype, scales[0], scales[1], what)

    def call(self, stream):
        def one(comm):
            return lib.koloReduceScatter(ptr(self.send), ptr(self.recv), self.recv.numel(),
                                         KOLO_TYPES[self.send.dtype], self.scaling.kolo_op(comm, self.send.dtype),
                                         comm, stream)
        return one

    def result(self):
        self.scaling.after(self.recv)
        return restored(self.recv[:self.rows], self.dtype)


def _issue(tensors, op, scales, async_, what, process_set):
    if op not in (Sum, Average):
        raise ValueError("%s: op %s: a reduce-scatter sums (Sum) or averages (Average)" % (what, op_name(op)))
    ps = member(process_set, what)
    kind, device = memory_kind(tensors, what)
    desc = [int(async_), op, float_bits(scales[0]), float_bits(scales[1])] + tensors_desc(tensors)
    return collective(REDUCESCATTER, what, desc, ps, lambda a: _run(tensors, op, scales, a, what, ps, kind, device),
                      async_, cuda=kind == "cuda")


def _run(tensors, op, scales, async_, what, ps, kind, device):
    parts = [_Part(t, op, scales, what, ps) for t in tensors]

    def call(comm, stream):
        calls = [p.call(stream) for p in parts if p.recv.numel()]
        return grouped(calls, [p.scaling for p in parts], comm)

    return run(kind, device, call, what, lambda: [p.result() for p in parts], parts, async_, ps)


@takes_name
def reducescatter(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=global_process_set):
    """This rank's part of `tensor` reduced over every rank (op: Average or
    Sum): the first dimension is split among the ranks, the first
    rows % size ranks getting one row more.  Every rank gives the same shape."""
    scales = (prescale_factor, postscale_factor)
    return single(_issue([tensor], op, scales, False, "kolo.torch.reducescatter", process_set), False)


@takes_name
def reducescatter_async(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                        process_set=global_process_set):
    scales = (prescale_factor, postscale_factor)
    return single(_issue([tensor], op, scales, True, "kolo.torch.reducescatter_async", process_set), True)


@takes_name
def grouped_reducescatter(tensors, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                          process_set=global_process_set):
    """reducescatter of each tensor, issued as one kolo group; a list."""
    scales = (prescale_factor, postscale_factor)
    return _issue(list(tensors), op, scales, False, "kolo.torch.grouped_reducescatter", process_set)


@takes_name
def grouped_reducescatter_async(tensors, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                                process_set=global_process_set):
    scales = (prescale_factor, postscale_factor)
    return _issue(list(tensors), op, scales, True, "kolo.torch.grouped_reducescatter_async", process_set)
