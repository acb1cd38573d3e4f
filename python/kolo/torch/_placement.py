"""Where a call's tensors live, and the communicator and stream that move
them: host tensors on host communicators, CUDA tensors on the CUDA
communicator on PyTorch's current stream.  Tensors of both kinds in one
call are refused with a sentence."""
import torch

from kolo._lib import ffi
from kolo.torch import _comms


def memory_kind(tensors, what):
    """("host", None) or ("cuda", device) for the tensors of one call."""
    devices = sorted({str(t.device) for t in tensors})
    kinds = {t.device.type for t in tensors}
    if kinds - {"cpu", "cuda"}:
        raise ValueError("%s: kolo moves host and CUDA memory only, not %s" % (what, ", ".join(devices)))
    if len(kinds) > 1:
        raise ValueError("%s: tensors in host and CUDA memory in one call (%s): kolo's communicators move "
                         "one kind of memory; put them on one device" % (what, ", ".join(devices)))
    if kinds == {"cuda"}:
        if len(devices) > 1:
            raise ValueError("%s: tensors on several CUDA devices in one call (%s)" % (what, ", ".join(devices)))
        return "cuda", tensors[0].device
    return "host", None


def ptr(tensor):
    return ffi.cast("void *", tensor.data_ptr())


def cuda_stream(device):
    """PyTorch's current stream on `device`, as a koloStream_t."""
    return ffi.cast("koloStream_t", torch.cuda.current_stream(device).cuda_stream)


def comm_and_stream(kind, device):
    """The blocking communicator of this memory kind, and its stream."""
    if kind == "cuda":
        return _comms.cuda_comm(device), cuda_stream(device)
    return _comms.world(), ffi.NULL
