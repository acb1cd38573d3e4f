"""op=Adasum of allreduce and its forms: koloAdasum on torch tensors.

kolo computes Adasum (Horovod's adaptive summation, kolo.h) on host
communicators only, so a CUDA tensor is combined through a host copy, as
Horovod does where its GPU Adasum is not built.  Each tensor is one
koloAdasum call (its own dot products and norms, as Horovod's per-tensor
Adasum); grouped forms issue them one after another, not in a kolo group,
since Adasum computes between its exchanges.  prescale_factor and
postscale_factor multiply the tensor before and the result after."""
import torch

from kolo._lib import lib
from kolo.torch._dtypes import KOLO_TYPES
from kolo.torch._handle import run
from kolo.torch._placement import memory_kind, ptr
from kolo.torch._scale import check_factor

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _prepare(tensor, inplace, pre, what):
    """(output, its contiguous host copy or itself, whether that is a copy)."""
    if tensor.dtype not in FLOATS:
        raise TypeError("%s: op Adasum combines floating-point tensors (float16, bfloat16, float32, float64), "
                        "not %s" % (what, tensor.dtype))
    out = tensor if inplace else tensor.clone(memory_format=torch.contiguous_format)
    work = out.detach().to("cpu").contiguous()
    copied = out.device.type != "cpu" or work.data_ptr() != out.data_ptr()
    if pre != 1.0:
        work.mul_(pre)
    return out, work, copied


def issue(tensors, inplace, async_, what, comms, scales):
    """Adasum of each of `tensors` over the ranks of `comms` (None: the job)."""
    memory_kind(tensors, what)  # one memory kind per call, as the other reductions
    pre = check_factor("prescale_factor", scales[0], torch.float32, what)
    post = check_factor("postscale_factor", scales[1], torch.float32, what)
    parts = [_prepare(t, inplace, pre, what) for t in tensors]

    def call(comm, stream):
        for _, work, _ in parts:
            if work.numel():
                res = lib.koloAdasum(ptr(work), ptr(work), work.numel(), KOLO_TYPES[work.dtype], comm, stream)
                if res not in (lib.koloSuccess, lib.koloInProgress):
                    return res
        return lib.koloSuccess

    def finish():
        for out, work, copied in parts:
            if post != 1.0:
                work.mul_(post)
            if copied:
                out.copy_(work)
        return [p[0] for p in parts]

    return run("host", None, call, what, finish, parts, async_, comms)
