"""local_rank() and local_size(): this process's place among the ranks on
its host, from the launcher where it says (Open MPI, torchrun, Slurm,
KOLO_LOCAL_RANK / KOLO_LOCAL_SIZE); else every rank's host identity is
gathered over kolo once, the identity being kolo's own rule: KOLO_HOSTID
when set, else the host name and boot id.

cross_rank() and cross_size(), Horovod's: the ranks of one local rank,
one per host, ordered by rank; this rank's place among those of its local
rank, and their number.  is_homogeneous(): every host has as many ranks.
Both from every rank's local rank and size, gathered once at init."""
import hashlib
import os
import socket

import torch

from kolo.torch import _comms

_VARS = (("KOLO_LOCAL_RANK", "KOLO_LOCAL_SIZE"),
         ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
         ("LOCAL_RANK", "LOCAL_WORLD_SIZE"))
_cached = {}


def _host_key():
    host = os.environ.get("KOLO_HOSTID")
    if not host:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
                boot = f.read().strip()
        except OSError:
            boot = ""
        host = socket.gethostname() + boot
    return int.from_bytes(hashlib.sha256(host.encode()).digest()[:7], "little")


def _from_launcher():
    for rank_var, size_var in _VARS:
        if rank_var in os.environ and size_var in os.environ:
            return int(os.environ[rank_var]), int(os.environ[size_var])
    return None


def _gathered():
    from kolo.torch._copies import allgather

    keys = allgather(torch.tensor([_host_key()], dtype=torch.int64)).tolist()
    me = keys[_comms.rank()]
    return keys[:_comms.rank()].count(me), keys.count(me)


def local():
    """(local rank, local size)."""
    _comms.world()
    if "local" not in _cached:
        _cached["local"] = _from_launcher() or _gathered()
    return _cached["local"]


def _gathered_topology():
    from kolo.torch._copies import allgather

    rank, size = local()
    every = allgather(torch.tensor([[rank, size]], dtype=torch.int64)).tolist()
    peers = [r for r, (lr, _) in enumerate(every) if lr == rank]
    return peers.index(_comms.rank()), len(peers), len({ls for _, ls in every}) == 1


def topology():
    """(cross rank, cross size, homogeneous); collective the first time (init)."""
    _comms.world()
    if "cross" not in _cached:
        _cached["cross"] = _gathered_topology()
    return _cached["cross"]


def cross_rank():
    return topology()[0]


def cross_size():
    return topology()[1]


def is_homogeneous():
    return topology()[2]


def local_rank():
    return local()[0]


def local_size():
    return local()[1]
