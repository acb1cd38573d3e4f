"""kolo.torch: a Horovod-style PyTorch API over kolo (libkolo, through cffi).

    import kolo.torch as kt
    kt.init()                                   # mpirun, srun, torchrun or KOLO_* variables
    kt.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = kt.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    kt.broadcast_optimizer_state(optimizer, root_rank=0)

Host tensors use host communicators; CUDA tensors the CUDA communicator
of this process's device on PyTorch's current stream (init(device=...), or
made at every rank's first CUDA call, collectively).  The CUDA path has
not run on a GPU yet (README, "Training with PyTorch").

Importing kolo.torch also registers the torch.distributed backend "kolo":
torch.distributed.init_process_group(backend="kolo") (docs/pytorch-backend.md).
"""
import torch.distributed as _dist

from kolo._lib import KoloError
from kolo.torch import _comms, _local
from kolo.torch._compression import Compression
from kolo.torch._copies import (allgather, allgather_async, alltoall, alltoall_async, broadcast, broadcast_,
                                broadcast_async, broadcast_async_, grouped_allgather, grouped_allgather_async)
from kolo.torch._ddp_hook import KoloHookState, kolo_hook
from kolo.torch._handle import poll, synchronize
from kolo.torch._join import join
from kolo.torch._ops_names import Adasum, Average, Max, Min, Product, Sum
from kolo.torch._optimizer import DistributedOptimizer
from kolo.torch._process_sets import ProcessSet, add_process_set, barrier, global_process_set, remove_process_set
from kolo.torch._reduce import (allreduce, allreduce_, allreduce_async, allreduce_async_, grouped_allreduce,
                                grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_)
from kolo.torch._scatter import (grouped_reducescatter, grouped_reducescatter_async, reducescatter,
                                reducescatter_async)
from kolo.torch._state_sync import allgather_object, broadcast_object, broadcast_optimizer_state, broadcast_parameters
from kolo.torch._sync_batch_norm import SyncBatchNorm
from kolo.torch import elastic  # Horovod's elastic training: kt.elastic.run, kt.elastic.TorchState

if _dist.is_available():
    from kolo.torch import _backend

    _backend.register()  # torch.distributed.init_process_group(backend="kolo")

rank, size, shutdown, is_initialized = _comms.rank, _comms.size, _comms.shutdown, _comms.initialized
local_rank, local_size = _local.local_rank, _local.local_size
cross_rank, cross_size, is_homogeneous = _local.cross_rank, _local.cross_size, _local.is_homogeneous


def init(device=None, timeout_ms=None, process_sets=None):
    """Joins the job: from mpirun (PMIx), srun, torchrun's variables or
    KOLO_ROOT / KOLO_RANK / KOLO_WORLD_SIZE, as koloCommInitFromEnv does.
    device: also make the CUDA communicator for it now (collective).
    timeout_ms: kolo's bound on waiting for a peer (KOLO_TIMEOUT_MS).
    process_sets: ProcessSets to add now, in order (as add_process_set);
    "dynamic" is taken and changes nothing (sets may always be added)."""
    _comms.init(device, timeout_ms)
    _local.topology()  # may gather host identities, and gathers local ranks: every rank, now
    if elastic._elastic():
        elastic._sets.at_init()  # process sets the job carries over its resets
    for process_set in [] if process_sets in (None, "dynamic") else process_sets:
        add_process_set(process_set)


__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
           "cross_rank", "cross_size", "is_homogeneous", "barrier",
           "ProcessSet", "add_process_set", "remove_process_set", "global_process_set",
           "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
           "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_",
           "reducescatter", "reducescatter_async", "grouped_reducescatter", "grouped_reducescatter_async",
           "allgather", "allgather_async", "grouped_allgather", "grouped_allgather_async",
           "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
           "alltoall", "alltoall_async", "poll", "synchronize", "join",
           "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object", "allgather_object",
           "DistributedOptimizer", "Compression", "SyncBatchNorm", "kolo_hook", "KoloHookState",
           "Average", "Sum", "Min", "Max", "Product", "Adasum", "KoloError", "elastic"]
