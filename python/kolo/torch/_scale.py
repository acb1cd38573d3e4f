"""prescale_factor and postscale_factor of the reductions, as Horovod means
them: the result is op(prescale * x over the ranks) * postscale.

The prescale is kolo's: a premul-sum op (koloRedOpCreatePreMulSum) made on
the communicator of the call, with Average's 1/size folded into its
scalar for floating types, so that an averaged, prescaled reduction is one
kolo call.  The postscale is a multiply of the result.  Integer tensors
take integral factors only (kolo multiplies them in their own type), and
a prescale needs op Sum or Average (a premul-sum is a sum)."""
import torch

from kolo._lib import check, ffi, lib
from kolo.torch._dtypes import KOLO_TYPES
from kolo.torch._ops_names import Average, Sum, op_name


def check_factor(name, factor, dtype, what):
    factor = float(factor)
    if factor != factor or factor in (float("inf"), float("-inf")):
        raise ValueError("%s: %s is %r, not a finite number" % (what, name, factor))
    if factor != 1.0 and dtype == torch.bool:
        raise TypeError("%s: %s is %g and the tensor is bool: bool tensors are not scaled" % (what, name, factor))
    integer = not (dtype.is_floating_point or dtype.is_complex)
    if integer and factor != int(factor):
        raise TypeError("%s: %s is %g and the tensor is %s: integer tensors take integral factors only" %
                        (what, name, factor, dtype))
    return factor


class Scaling:
    """How one tensor's reduction applies the factors: kolo_op(comm) gives
    the op to call (a premul-sum made on comm when there is a prescale),
    release(comm) frees it after the call, after(buf) scales the result."""

    def __init__(self, op, dtype, prescale, postscale, what):
        self.pre = check_factor("prescale_factor", prescale, dtype, what)
        self.post = check_factor("postscale_factor", postscale, dtype, what)
        if self.pre != 1.0 and op not in (Sum, Average):
            raise ValueError("%s: prescale_factor %g needs op Sum or Average, not %s" % (what, self.pre, op_name(op)))
        self.op, self.size, self.made = op, None, None
        self.integer = not (dtype.is_floating_point or dtype.is_complex)

    def _scalar(self, buf_dtype):
        """The premul-sum's scalar, one element of the buffer's type."""
        value = self.pre
        if self.op == Average and not self.integer:
            value /= self.size  # Average's division, in the same multiply
        if self.integer:
            return torch.tensor([int(value)], dtype=torch.int64).to(buf_dtype)
        return torch.tensor([value], dtype=buf_dtype)

    def kolo_op(self, comm, buf_dtype):
        """The koloRedOp_t for a call on comm with a buffer of buf_dtype."""
        if self.pre == 1.0:
            return self.op
        count = ffi.new("int *")
        check(lib.koloCommCount(comm, count), comm)
        self.size = count[0]
        scalar, op = self._scalar(buf_dtype), ffi.new("koloRedOp_t *")
        check(lib.koloRedOpCreatePreMulSum(op, ffi.cast("void *", scalar.data_ptr()), KOLO_TYPES[buf_dtype],
                                           lib.koloScalarHostImmediate, comm), comm, "kolo.torch: prescale_factor")
        self.made = op[0]
        return self.made

    def release(self, comm):
        if self.made is not None:
            lib.koloRedOpDestroy(self.made, comm)
            self.made = None

    def after(self, buf):
        """Scales the reduced buffer in place: an integer average's
        division (after a premul-sum), then the postscale."""
        if self.pre != 1.0 and self.op == Average and self.integer:
            buf.div_(self.size, rounding_mode="trunc")  # C's truncation, as kolo's integer Average
        if self.post != 1.0:
            buf.mul_(int(self.post) if self.integer else self.post)
