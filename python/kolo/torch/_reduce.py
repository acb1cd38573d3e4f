"""allreduce, allreduce_, grouped_allreduce and their async forms."""
import torch

from kolo._lib import lib
from kolo.torch._dtypes import KOLO_TYPES, reducible
from kolo.torch._handle import run
from kolo.torch import _adasum
from kolo.torch._join import ALLREDUCE, float_bits, takes_name, tensors_desc
from kolo.torch._names import collective
from kolo.torch._ops_names import Adasum, Average, check_op, op_code
from kolo.torch._placement import memory_kind, ptr
from kolo.torch._process_sets import global_process_set, member
from kolo.torch._scale import Scaling


def _prepare(tensor, op, inplace, scales, what):
    """(output, contiguous work tensor, kolo buffer, whether the buffer is a copy, its Scaling)."""
    out = tensor if inplace else tensor.clone(memory_format=torch.contiguous_format)
    work = out if out.is_contiguous() else out.contiguous()
    buf, copied = reducible(work, op, what)
    return out, work, buf, copied, Scaling(op, tensor.dtype, scales[0], scales[1], what)


def grouped(calls, scalings, comm):
    """Runs call(comm) -> koloResult_t for each of `calls` in one kolo
    group, then frees the premul-sum ops of `scalings`."""
    res = lib.koloGroupStart()
    if res != lib.koloSuccess:
        return res
    try:
        for one in calls:
            res = one(comm)
            if res not in (lib.koloSuccess, lib.koloInProgress):
                return res
    finally:
        end = lib.koloGroupEnd()
        for s in scalings:
            s.release(comm)
    return end


def _issue(tensors, op, inplace, async_, what, comms=None, scales=(1.0, 1.0)):
    check_op(op, what)
    if op is Adasum:
        return _adasum.issue(tensors, inplace, async_, what, comms, scales)
    kind, device = memory_kind(tensors, what)
    parts = [_prepare(t, op, inplace, scales, what) for t in tensors]

    def reduce(buf, scaling, stream):
        def one(comm):
            return lib.koloAllReduce(ptr(buf), ptr(buf), buf.numel(), KOLO_TYPES[buf.dtype],
                                     scaling.kolo_op(comm, buf.dtype), comm, stream)
        return one

    def call(comm, stream):
        calls = [reduce(p[2], p[4], stream) for p in parts if p[2].numel()]
        return grouped(calls, [p[4] for p in parts], comm)

    def finish():
        for out, work, buf, copied, scaling in parts:
            scaling.after(buf)
            if copied:
                work.copy_(buf)  # a widened integer narrows back, wrapping as its own type
            if work is not out:
                out.copy_(work)
        return [p[0] for p in parts]

    return run(kind, device, call, what, finish, parts, async_, comms)


def _public(tensors, op, inplace, async_, what, scales, process_set):
    ps = member(process_set, what)
    check_op(op, what)
    kind, _ = memory_kind(tensors, what)
    desc = [int(async_), op_code(op), float_bits(scales[0]), float_bits(scales[1])] + tensors_desc(tensors)
    return collective(ALLREDUCE, what, desc, ps, lambda a: _issue(tensors, op, inplace, a, what, ps, scales), async_,
                      cuda=kind == "cuda")


def single(result_or_handle, async_):
    if async_:
        finish = result_or_handle._finish
        result_or_handle._finish = lambda: finish()[0]
        return result_or_handle
    return result_or_handle[0]


@takes_name
def allreduce(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """A new tensor: `tensor` reduced over every rank (op: Average, Sum,
    Min, Max, Product, or Adasum: Horovod's adaptive summation of float
    tensors, kolo's koloAdasum); prescale_factor multiplies every rank's
    tensor before the reduction (Sum, Average and Adasum), postscale_factor
    the result."""
    scales = (prescale_factor, postscale_factor)
    return single(_public([tensor], op, False, False, "kolo.torch.allreduce", scales, process_set), False)


@takes_name
def allreduce_(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """Reduces `tensor` over every rank, in place; returns it."""
    scales = (prescale_factor, postscale_factor)
    return single(_public([tensor], op, True, False, "kolo.torch.allreduce_", scales, process_set), False)


@takes_name
def allreduce_async(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    scales = (prescale_factor, postscale_factor)
    return single(_public([tensor], op, False, True, "kolo.torch.allreduce_async", scales, process_set), True)


@takes_name
def allreduce_async_(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    scales = (prescale_factor, postscale_factor)
    return single(_public([tensor], op, True, True, "kolo.torch.allreduce_async_", scales, process_set), True)


@takes_name
def grouped_allreduce(tensors, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """New tensors, each reduced over every rank, issued as one kolo group;
    the tensors must all be in host memory or all on one CUDA device."""
    scales = (prescale_factor, postscale_factor)
    return _public(list(tensors), op, False, False, "kolo.torch.grouped_allreduce", scales, process_set)


@takes_name
def grouped_allreduce_(tensors, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    scales = (prescale_factor, postscale_factor)
    return _public(list(tensors), op, True, False, "kolo.torch.grouped_allreduce_", scales, process_set)


@takes_name
def grouped_allreduce_async(tensors, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    scales = (prescale_factor, postscale_factor)
    return _public(list(tensors), op, False, True, "kolo.torch.grouped_allreduce_async", scales, process_set)


@takes_name
def grouped_allreduce_async_(tensors, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                             process_set=global_process_set):
    scales = (prescale_factor, postscale_factor)
    return _public(list(tensors), op, True, True, "kolo.torch.grouped_allreduce_async_", scales, process_set)
