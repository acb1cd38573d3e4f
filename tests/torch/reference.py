"""What the kolo.torch tests compare with: every rank's input, made from a
seed and the rank, so that each rank computes the exact result of a
collective itself (int64 with the type's wrapping, float64 with a bound on
the rounding of the reduction), and element-by-element checks."""
import hashlib

import torch

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTS = (torch.int8, torch.uint8, torch.int32, torch.int64, torch.int16)
EPS = {torch.float32: 2.0 ** -24, torch.float64: 2.0 ** -53, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}


def generator(*seed):
    """A generator seeded by `seed` alike in every process (not hash(): salted per process)."""
    digest = hashlib.sha256(repr(seed).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:7], "little"))


def rank_input(dtype, shape, case, rank):
    """Rank `rank`'s input of a case: the full range of an integer type,
    N(0, 4) rounded to a float type, 0/1 for bool, both parts for complex."""
    g = generator(case, rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        real = torch.float32 if dtype == torch.complex64 else torch.float64
        return torch.complex(rank_input(real, shape, case + ("re",), rank), rank_input(real, shape, case + ("im",), rank))
    if dtype.is_floating_point:
        return (4 * torch.randn(shape, generator=g, dtype=torch.float64)).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, generator=g, dtype=torch.int64).to(dtype)


def reduce_exact(inputs, op, dtype):
    """(expected as float64/int64, tolerance per element) of reducing the
    ranks' inputs with op ("sum", "avg", "min", "max", "prod")."""
    n = len(inputs)
    if dtype == torch.bool or not (dtype.is_floating_point or dtype.is_complex):
        x = torch.stack([t.to(torch.int64) for t in inputs])
        if op in ("min", "max"):
            out = x.min(0).values if op == "min" else x.max(0).values
        else:
            out = x.sum(0) if op in ("sum", "avg") else x.prod(0)  # int64 wraps mod 2^64
            out = out.to(dtype).to(torch.int64)  # ... and the type's own wrap
            if op == "avg":  # kolo: the wrapped sum divided with C's truncation
                out = torch.div(out, n, rounding_mode="trunc")
        return out, torch.zeros_like(out, dtype=torch.float64)
    if dtype.is_complex:
        inputs = [torch.view_as_real(t) for t in inputs]
        dtype = inputs[0].dtype
    x = torch.stack([t.to(torch.float64) for t in inputs])
    eps = EPS[dtype]
    if op in ("min", "max"):
        out = x.min(0).values if op == "min" else x.max(0).values
        return out, torch.zeros_like(out)
    if op == "prod":
        out = x.prod(0)
        return out, 2 * n * eps * out.abs()
    out = x.sum(0)
    tol = 2 * n * eps * x.abs().sum(0)  # one rounding per hop of the ring, and the result's
    if op == "avg":
        out, tol = out / n, tol / n + 2 * eps * (out / n).abs()
    return out, tol


class Checks:
    """Counts checks; a failure prints what differed, the first elements of it."""

    def __init__(self, rank):
        self.rank, self.count, self.failed = rank, 0, 0

    def fail(self, what, detail):
        self.failed += 1
        print("rank %d: FAIL %s: %s" % (self.rank, what, detail), flush=True)

    def true(self, cond, what, detail=""):
        self.count += 1
        if not cond:
            self.fail(what, detail)

    def close(self, got, expected, tol, what):
        """got (any dtype) equals expected within tol, element by element."""
        self.count += 1
        if got.is_complex():
            got = torch.view_as_real(got)
        if tuple(got.shape) != tuple(expected.shape):
            return self.fail(what, "shape %s, expected %s" % (tuple(got.shape), tuple(expected.shape)))
        if expected.dtype == torch.int64:
            bad = got.to(torch.int64) != expected
        else:
            diff = (got.to(torch.float64) - expected).abs()
            bad = ~(diff <= tol) & ~(got.to(torch.float64).isnan() & expected.isnan())
        if bad.any():
            idx = bad.reshape(-1).nonzero()[:3].reshape(-1).tolist()
            g, e = got.reshape(-1), expected.reshape(-1)
            self.fail(what, "%d of %d elements wrong, e.g. [%s]" % (
                int(bad.sum()), bad.numel(), ", ".join("%d: %s vs %s" % (i, g[i].item(), e[i].item()) for i in idx)))

    def equal(self, got, expected, what):
        """Bit for bit (copies)."""
        self.count += 1
        if got.dtype != expected.dtype or got.shape != expected.shape:
            return self.fail(what, "%s %s, expected %s %s" % (got.dtype, tuple(got.shape), expected.dtype,
                                                              tuple(expected.shape)))
        a, b = got.contiguous().reshape(-1).view(torch.uint8), expected.contiguous().reshape(-1).view(torch.uint8)
        if not torch.equal(a, b):
            self.fail(what, "%d of %d bytes differ" % (int((a != b).sum()), a.numel()))

    def summary(self):
        print("rank %d: %d checks, %d failed" % (self.rank, self.count, self.failed), flush=True)
        return 1 if self.failed else 0


# ---- Adasum ---------------------------------------------------------------------
def adasum2(a, b):
    """Horovod's combine rule on lists of Python floats (doubles; a squared
    norm below 1e-8: coefficient 1), apart from kolo and torch."""
    dot = sum(x * y for x, y in zip(a, b))
    aa, bb = sum(x * x for x in a), sum(y * y for y in b)
    ca = 1.0 - dot / (2 * aa) if aa >= 1e-8 else 1.0
    cb = 1.0 - dot / (2 * bb) if bb >= 1e-8 else 1.0
    return [ca * x + cb * y for x, y in zip(a, b)]


def adasum_exact(xs):
    """(expected, tolerance): ranks p+i folded into rank i, then the binary
    tree over consecutive ranks, each element within 1e-5 (float32; 1e-12
    float64) of max(|expected|, the largest input), as test_e2e_adasum.cc."""
    vs = [x.to(torch.float64).reshape(-1).tolist() for x in xs]
    p = 1
    while 2 * p <= len(vs):
        p *= 2
    for i in range(len(vs) - p):
        vs[i] = adasum2(vs[i], vs[i + p])
    w = 1
    while w < p:
        for b in range(0, p, 2 * w):
            vs[b] = adasum2(vs[b], vs[b + w])
        w *= 2
    expected = torch.tensor(vs[0], dtype=torch.float64).reshape(xs[0].shape)
    scale = max([float(x.abs().max()) for x in xs if x.numel()] + [0.0])
    rel = 1e-12 if xs[0].dtype == torch.float64 else 1e-5
    return expected, rel * torch.clamp(expected.abs(), min=scale)


def adasum_input(dtype, shape, case, r):
    """A common part plus 0.6 x the rank's own, so that Adasum differs from a sum and an average."""
    common = rank_input(torch.float64, shape, case + ("common",), 0)
    return (common + 0.6 * rank_input(torch.float64, shape, case, r)).to(dtype)
