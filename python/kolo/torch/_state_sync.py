"""broadcast_parameters, broadcast_optimizer_state, broadcast_object:
starting every rank from root_rank's model and optimizer."""
import io

import torch

from kolo.torch._copies import allgather, broadcast_
from kolo.torch import _comms
from kolo.torch._process_sets import global_process_set


def broadcast_parameters(params, root_rank=0):
    """Overwrites, in place, every tensor of `params` (a state_dict, a
    dict, or a list of (name, tensor) pairs such as named_parameters())
    with root_rank's.  Each tensor is its own call, so host and CUDA
    tensors may be mixed here."""
    items = sorted(params.items()) if isinstance(params, dict) else list(params)
    for name, tensor in items:
        if not torch.is_tensor(tensor):
            raise TypeError("kolo.torch.broadcast_parameters: %s is a %s, not a tensor" % (name, type(tensor).__name__))
        with torch.no_grad():
            broadcast_(tensor.data if isinstance(tensor, torch.nn.Parameter) else tensor, root_rank)


def _serialized(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def _loaded(data):
    return torch.load(io.BytesIO(data.numpy().tobytes()), map_location="cpu")


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's `obj` (anything torch.save takes), on every rank (of
    process_set; root_rank is a rank of the job): its length, then its
    bytes, broadcast over the host communicator."""
    if _comms.rank() == root_rank:
        data = _serialized(obj)
        length = torch.tensor([data.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank, process_set=process_set)
    if _comms.rank() != root_rank:
        data = torch.empty(int(length[0]), dtype=torch.uint8)
    broadcast_(data, root_rank, process_set=process_set)
    if _comms.rank() == root_rank:
        return obj
    return _loaded(data)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's `obj` (anything torch.save takes), in a list in rank
    order (loaded on the host, as broadcast_object's); with process_set,
    those of its ranks."""
    data = _serialized(obj)
    lengths = allgather(torch.tensor([data.numel()], dtype=torch.int64), process_set=process_set).tolist()
    every = allgather(data, process_set=process_set)
    starts = [sum(lengths[:r]) for r in range(len(lengths))]
    return [_loaded(every[s:s + n]) for s, n in zip(starts, lengths)]


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Gives every rank root_rank's optimizer state (its state_dict: the
    per-parameter tensors such as momentum, and the hyperparameters of its
    groups); load_state_dict moves the tensors to the parameters' devices."""
    state = broadcast_object(optimizer.state_dict(), root_rank)
    if _comms.rank() != root_rank:
        optimizer.load_state_dict(state)
