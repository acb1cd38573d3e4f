"""torch dtypes as kolo datatypes, and the exact stand-ins for those kolo
has no type for.

kolo reduces int8, uint8, int32, int64, float16, bfloat16, float32 and
float64.  Others are refused with a sentence unless an exact stand-in
exists: int16 reduces as int32 (sum, min, max, product: the result, cast
back, wraps as int16 arithmetic would), bool as uint8 (min: all, max:
any), complex as its real and imaginary floats (sum, average).  Copies
(allgather, broadcast, alltoall) move any dtype as its bytes.
"""
import torch

from kolo._lib import lib

from kolo.torch._ops_names import Average, Max, Min, Product, Sum, op_name

KOLO_TYPES = {
    torch.int8: lib.koloInt8, torch.uint8: lib.koloUint8, torch.int32: lib.koloInt32,
    torch.int64: lib.koloInt64, torch.float16: lib.koloFloat16, torch.bfloat16: lib.koloBfloat16,
    torch.float32: lib.koloFloat32, torch.float64: lib.koloFloat64,
}

# dtype: (the ops it takes, how the tensor becomes one kolo has a type for)
_STAND_INS = {
    torch.int16: ((Sum, Min, Max, Product), "widen", torch.int32),
    torch.bool: ((Min, Max), "view", torch.uint8),
    torch.complex64: ((Sum, Average), "real", torch.float32),
    torch.complex128: ((Sum, Average), "real", torch.float64),
}


def kolo_type(dtype, what):
    """The kolo datatype of a dtype kolo reduces natively, or a sentence."""
    if dtype in KOLO_TYPES:
        return KOLO_TYPES[dtype]
    raise TypeError("%s: kolo has no type for %s (it has int8, uint8, int32, int64, float16, bfloat16, "
                    "float32, float64)" % (what, dtype))


def reducible(tensor, op, what):
    """(a tensor of a kolo type holding the values of the contiguous
    `tensor` for a reduction with `op`, True when it is a copy that must be
    written back rather than a view of `tensor`'s memory)."""
    dtype = tensor.dtype
    if dtype in KOLO_TYPES:
        return tensor, False
    if dtype not in _STAND_INS:
        kolo_type(dtype, what)  # raises
    ops, how, as_dtype = _STAND_INS[dtype]
    if op not in ops:
        raise TypeError("%s: kolo has no type for %s; it stands in as %s only for %s, not %s" %
                        (what, dtype, as_dtype, ", ".join(op_name(o) for o in ops), op_name(op)))
    if how == "widen":
        return tensor.to(as_dtype), True
    if how == "view":
        return tensor.view(as_dtype), False
    return torch.view_as_real(tensor), False


def as_bytes(tensor):
    """A uint8 view of a contiguous tensor's bytes (copies move any dtype)."""
    return tensor.reshape(-1).view(torch.uint8)


def restored(buf, dtype):
    """The values of a reducible() buffer as `dtype` again (a view, or a
    narrowing copy for a widened integer)."""
    if buf.dtype == dtype:
        return buf
    if dtype.is_complex:
        return torch.view_as_complex(buf)
    if dtype == torch.bool:
        return buf.view(torch.bool)
    return buf.to(dtype)
