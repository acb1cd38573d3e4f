"""The kolo backend's conversions and kolo calls (_backend.py): ReduceOps
to kolo's, tensors to buffers kolo reduces and back, and groups of calls
issued as one kolo group."""
import torch

from kolo._lib import lib
from kolo.torch._dtypes import as_bytes, reducible
from kolo.torch._ops_names import Average, Max, Min, Product, Sum
from kolo.torch._placement import ptr

_OPS = {"SUM": Sum, "PRODUCT": Product, "MIN": Min, "MAX": Max, "AVG": Average}


def _kolo_op(op, what):
    """kolo's op for a torch ReduceOp (or RedOpType), or a sentence."""
    name = getattr(getattr(op, "op", op), "name", str(op))
    if name in _OPS:
        return _OPS[name]
    if name in ("BAND", "BOR", "BXOR"):
        raise RuntimeError("%s: ReduceOp.%s: kolo has no bitwise reductions (it reduces with SUM, PRODUCT, MIN, "
                           "MAX and AVG)" % (what, name))
    if name == "PREMUL_SUM":
        raise RuntimeError("%s: ReduceOp.PREMUL_SUM: PyTorch does not pass its factor to a Python backend; multiply "
                           "the tensor by it and use SUM" % what)
    raise RuntimeError("%s: ReduceOp %s is none of kolo's SUM, PRODUCT, MIN, MAX, AVG" % (what, name))


def _to_kolo(tensor, op, what):
    """A contiguous tensor of a kolo type with `tensor`'s values, for a
    reduction with op (int16 widened, bool and complex as views)."""
    return reducible(tensor.contiguous(), op, what)[0]


def _from_kolo(buf, dtype):
    """buf (of _to_kolo's type) as a tensor of dtype, to copy_ from."""
    if dtype == buf.dtype:
        return buf
    if dtype.is_complex:
        return torch.view_as_complex(buf)
    return buf.view(dtype) if dtype == torch.bool else buf


def _nbytes(t):
    return t.numel() * t.element_size()


def _flat_bytes(t):
    return as_bytes(t.contiguous())


def _call_all(calls, comm, stream):
    """Runs the kolo calls (each call(comm, stream)) as one kolo group;
    the first failure's result."""
    if len(calls) == 1:
        return calls[0](comm, stream)
    res = lib.koloGroupStart()
    if res != lib.koloSuccess:
        return res
    try:
        for call in calls:
            res = call(comm, stream)
            if res not in (lib.koloSuccess, lib.koloInProgress):
                return res
    finally:
        end = lib.koloGroupEnd()
    return end


def _send(buf, peer):
    return lambda comm, stream: lib.koloSend(ptr(buf), buf.numel(), lib.koloUint8, peer, comm, stream)


def _recv(buf, peer):
    return lambda comm, stream: lib.koloRecv(ptr(buf), buf.numel(), lib.koloUint8, peer, comm, stream)
