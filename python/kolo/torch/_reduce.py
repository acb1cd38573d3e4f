"""allreduce, allreduce_, grouped_allreduce and their async forms."""
import torch

from kolo._lib import lib
from kolo.torch._dtypes import KOLO_TYPES, reducible
from kolo.torch._handle import run
from kolo.torch._ops_names import Average, check_op
from kolo.torch._placement import memory_kind, ptr


def _prepare(tensor, op, inplace, what):
    """(output, contiguous work tensor, kolo buffer, whether the buffer is a copy)."""
    out = tensor if inplace else tensor.clone(memory_format=torch.contiguous_format)
    work = out if out.is_contiguous() else out.contiguous()
    buf, copied = reducible(work, op, what)
    return out, work, buf, copied


def _issue(tensors, op, inplace, async_, what, comms=None):
    check_op(op, what)
    kind, device = memory_kind(tensors, what)
    parts = [_prepare(t, op, inplace, what) for t in tensors]

    def call(comm, stream):
        res = lib.koloGroupStart()
        if res != lib.koloSuccess:
            return res
        try:
            for _, _, buf, _ in parts:
                if buf.numel():
                    res = lib.koloAllReduce(ptr(buf), ptr(buf), buf.numel(), KOLO_TYPES[buf.dtype], op, comm, stream)
                    if res not in (lib.koloSuccess, lib.koloInProgress):
                        return res
        finally:
            end = lib.koloGroupEnd()
        return end

    def finish():
        for out, work, buf, copied in parts:
            if copied:
                work.copy_(buf)  # a widened integer narrows back, wrapping as its own type
            if work is not out:
                out.copy_(work)
        return [p[0] for p in parts]

    return run(kind, device, call, what, finish, parts, async_, comms)


def _single(result_or_handle, async_):
    if async_:
        finish = result_or_handle._finish
        result_or_handle._finish = lambda: finish()[0]
        return result_or_handle
    return result_or_handle[0]


def allreduce(tensor, op=Average, name=None):
    """A new tensor: `tensor` reduced over every rank (op: Average, Sum, Min, Max, Product)."""
    return _single(_issue([tensor], op, False, False, "kolo.torch.allreduce"), False)


def allreduce_(tensor, op=Average, name=None):
    """Reduces `tensor` over every rank, in place; returns it."""
    return _single(_issue([tensor], op, True, False, "kolo.torch.allreduce_"), False)


def allreduce_async(tensor, op=Average, name=None):
    return _single(_issue([tensor], op, False, True, "kolo.torch.allreduce_async"), True)


def allreduce_async_(tensor, op=Average, name=None):
    return _single(_issue([tensor], op, True, True, "kolo.torch.allreduce_async_"), True)


def grouped_allreduce(tensors, op=Average, name=None):
    """New tensors, each reduced over every rank, issued as one kolo group;
    the tensors must all be in host memory or all on one CUDA device."""
    return _issue(list(tensors), op, False, False, "kolo.torch.grouped_allreduce")


def grouped_allreduce_(tensors, op=Average, name=None):
    return _issue(list(tensors), op, True, False, "kolo.torch.grouped_allreduce_")


def grouped_allreduce_async(tensors, op=Average, name=None):
    return _issue(list(tensors), op, False, True, "kolo.torch.grouped_allreduce_async")


def grouped_allreduce_async_(tensors, op=Average, name=None):
    return _issue(list(tensors), op, True, True, "kolo.torch.grouped_allreduce_async_")
