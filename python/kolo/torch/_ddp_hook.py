"""A DDP communication hook: model.register_comm_hook(state, kolo_hook)
routes DDP's gradient buckets through kolo instead of its process group.

DDP launches its buckets in the same order on every rank, as kolo needs.
A host bucket goes to kolo's non-blocking host communicator; a thread
completes its future when kolo has reduced it (backward goes on
meanwhile).  A CUDA bucket is reduced on the current stream and its
future is CUDA-aware (torch.futures.Future(devices=...)), so DDP's later
work on the stream waits for it."""
import torch

from kolo.torch._completer import Completer
from kolo.torch._compression import Compression
from kolo.torch._ops_names import Average, Sum
from kolo.torch._placement import memory_kind
from kolo.torch._reduce import _issue, single

_completer = Completer("kolo-ddp-hook")


class KoloHookState:
    """State for kolo_hook: op (Average or Sum), compression
    (Compression.none, fp16 or bf16), and process_group: a group of
    the "kolo" torch.distributed backend whose communicators carry the
    buckets.  Without one, the buckets go to kolo.torch's job (init()), or,
    when init() was not called, to the default group if it is kolo's."""

    def __init__(self, op=Average, compression=Compression.none, process_group=None):
        if op not in (Average, Sum):
            raise ValueError("kolo.torch.kolo_hook: gradients are averaged (Average) or summed (Sum)")
        self.op, self.compression, self.process_group = op, compression, process_group


def kolo_hook(state, bucket):
    """DDP communication hook (torch.distributed.GradBucket -> Future).
    state: a KoloHookState, a process group of the "kolo" backend, or None."""
    from kolo.torch._backend import group_of

    group = group_of(state)
    state = state if isinstance(state, KoloHookState) else KoloHookState()
    grads = bucket.buffer()
    kind, device = memory_kind([grads], "kolo.torch.kolo_hook")
    wire = state.compression.wire_dtype(grads.dtype)
    buf = grads if wire == grads.dtype else grads.to(wire)

    def finish(reduced):
        return grads.copy_(reduced) if reduced is not grads else grads

    handle = single(_issue([buf], state.op, True, True, "kolo.torch.kolo_hook", comms=group), True)
    if kind == "cuda":
        future = torch.futures.Future(devices=[device])
        future.set_result(finish(handle.wait()))  # the stream waits; the host does not
        return future
    return _completer.add(handle, finish=finish)
