"""Horovod's calls beyond the core ones, each against a reference every rank
computes itself (reference.py: exact integers with the type's wrapping,
float64 with a bound on rounding): cross_rank / cross_size /
is_homogeneous (with a made-up layout of 2 ranks per host), barrier,
prescale_factor / postscale_factor on every allreduce form, reducescatter
(Horovod's uneven split), grouped_allgather, allgather_object,
DistributedOptimizer's gradient_predivide_factor, sparse_as_dense and
Compression.bf16, SyncBatchNorm against BatchNorm over the whole batch
in one process, and op=Adasum (allreduce forms and DistributedOptimizer)
against an Adasum in Python floats.  Run under mpirun; prints "rank r: N checks, M failed"."""
import os
import sys
import time

import torch

import kolo.torch as kt
from reference import EPS, FLOATS, INTS, Checks, adasum_exact, adasum_input, generator, rank_input, reduce_exact

RANKS_PER_HOST = 2  # the made-up layout, given to kolo.torch as KOLO_LOCAL_RANK / KOLO_LOCAL_SIZE
NATIVE = FLOATS + INTS[:4]
SCALED_TYPES = NATIVE + (torch.int16, torch.complex64, torch.complex128)
OPS = ("sum", "avg")


def fake_hosts():
    """Rank r is on host r // 2: sets kolo's local variables before init."""
    rank, n = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    host = rank // RANKS_PER_HOST
    os.environ["KOLO_LOCAL_RANK"] = str(rank % RANKS_PER_HOST)
    os.environ["KOLO_LOCAL_SIZE"] = str(min(n, (host + 1) * RANKS_PER_HOST) - host * RANKS_PER_HOST)


def check_topology(c, n, me):
    hosts = (n + RANKS_PER_HOST - 1) // RANKS_PER_HOST
    with_my_local_rank = [r for r in range(n) if r % RANKS_PER_HOST == me % RANKS_PER_HOST]
    c.true(kt.local_rank() == me % RANKS_PER_HOST, "local_rank", str(kt.local_rank()))
    c.true(kt.cross_rank() == me // RANKS_PER_HOST, "cross_rank is my host's index", str(kt.cross_rank()))
    c.true(kt.cross_size() == len(with_my_local_rank), "cross_size: hosts with my local rank", str(kt.cross_size()))
    homogeneous = hosts * RANKS_PER_HOST == n or n == 1
    c.true(kt.is_homogeneous() == homogeneous, "is_homogeneous with %d ranks" % n, str(kt.is_homogeneous()))


def check_barrier(c, n, me):
    """Rank 0 arrives 0.3 s late: nobody leaves before it came."""
    if me == 0:
        time.sleep(0.3)
    t0 = time.monotonic()
    kt.barrier()
    waited = torch.tensor([time.monotonic() - t0])
    c.true(n == 1 or me == 0 or float(waited) > 0.2, "barrier waits for the last rank", "%.3f s" % float(waited))


# ---- references of scaled reductions -----------------------------------
def scaled_exact(xs, op, dtype, pre, post):
    """(expected, tolerance) of op(pre * x over the ranks) * post."""
    n = len(xs)
    if not (dtype.is_floating_point or dtype.is_complex):
        s = (torch.stack([t.to(torch.int64) for t in xs]) * int(pre)).sum(0).to(dtype).to(torch.int64)
        if op == "avg":
            s = torch.div(s, n, rounding_mode="trunc")
        s = (s * int(post)).to(dtype).to(torch.int64)
        return s, torch.zeros_like(s, dtype=torch.float64)
    expected, tol = reduce_exact(xs, op, dtype)
    eps = EPS[dtype if dtype.is_floating_point else xs[0].real.dtype]
    expected = expected * (pre * post)
    return expected, 2 * abs(pre * post) * tol + 4 * eps * expected.abs()


def factors(dtype):
    return (-2.0, 3.0) if not (dtype.is_floating_point or dtype.is_complex) else (0.375, -2.5)


def check_scaled_allreduce(c, n, me):
    for dtype in SCALED_TYPES:
        for op in OPS if dtype != torch.int16 else ("sum",):
            pre, post = factors(dtype)
            case = ("scaled", str(dtype), op)
            rows = 1 + int(torch.randint(0, 9, (1,), generator=generator(case, "rows")))
            xs = [rank_input(dtype, (rows, 7), case, r) for r in range(n)]
            expected, tol = scaled_exact(xs, op, dtype, pre, post)
            what = "%s %s x%g /x%g" % (dtype, op, pre, post)
            kop = kt.Sum if op == "sum" else kt.Average
            c.close(kt.allreduce(xs[me], op=kop, prescale_factor=pre, postscale_factor=post), expected, tol,
                    "allreduce " + what)
            t = xs[me].t().clone().t()  # not contiguous
            kt.synchronize(kt.allreduce_async_(t, op=kop, prescale_factor=pre, postscale_factor=post))
            c.close(t, expected, tol, "allreduce_async_ (transposed) " + what)
            mine = xs[me].clone()
            kt.allreduce_(mine, op=kop, postscale_factor=post)
            c.close(mine, *scaled_exact(xs, op, dtype, 1.0, post), "allreduce_ postscale only " + what)
            h = kt.allreduce_async(xs[me], op=kop, prescale_factor=pre)
            c.close(kt.synchronize(h), *scaled_exact(xs, op, dtype, pre, 1.0), "allreduce_async prescale " + what)


def check_scaled_grouped(c, n, me):
    """Floating types of several sizes (0 too) in one group, one pair of factors."""
    types = (torch.float32, torch.bfloat16, torch.float64, torch.complex64, torch.float16)
    shapes = ((5, 3), (0, 4), (1,), (2, 0), (9,))
    xs = [[rank_input(d, s, ("grouped", str(d)), r) for r in range(n)] for d, s in zip(types, shapes)]
    refs = [scaled_exact(x, "avg", d, 0.375, -2.5) for x, d in zip(xs, types)]
    for name, form in (("grouped_allreduce", kt.grouped_allreduce), ("grouped_allreduce_", kt.grouped_allreduce_),
                       ("grouped_allreduce_async", kt.grouped_allreduce_async),
                       ("grouped_allreduce_async_", kt.grouped_allreduce_async_)):
        mine = [x[me].clone() for x in xs]
        outs = form(mine, op=kt.Average, prescale_factor=0.375, postscale_factor=-2.5)
        outs = kt.synchronize(outs) if "async" in name else outs
        if name.endswith("_"):
            c.true(all(o is m for o, m in zip(outs, mine)), name + " returns its tensors")
        for d, out, (e, tol) in zip(types, outs, refs):
            c.close(out, e, tol, "%s avg %s" % (name, d))
    ints = [rank_input(torch.int32, (4, 2), ("grouped-int",), r) for r in range(n)]
    outs = kt.grouped_allreduce([ints[me]], op=kt.Average, prescale_factor=-2, postscale_factor=3)
    c.close(outs[0], *scaled_exact(ints, "avg", torch.int32, -2, 3), "grouped_allreduce avg int32 x-2 /x3")


def check_refused(c, call, exc, words, what):
    try:
        call()
        c.true(False, "refused: " + what)
    except exc as e:
        c.true(words in str(e), "refused in words: " + what, str(e))


def check_scale_refusals(c, n, me):
    x = torch.ones(3)
    check_refused(c, lambda: kt.allreduce(x, op=kt.Max, prescale_factor=2.0), ValueError, "needs op Sum or Average",
                  "prescale with Max")
    check_refused(c, lambda: kt.allreduce(torch.ones(3, dtype=torch.int32), postscale_factor=0.5), TypeError,
                  "integral factors only", "a fractional factor on int32")
    check_refused(c, lambda: kt.allreduce(torch.ones(3, dtype=torch.bool), op=kt.Max, postscale_factor=2),
                  TypeError, "bool tensors are not scaled", "a factor on bool")
    check_refused(c, lambda: kt.allreduce(x, prescale_factor=float("nan")), ValueError, "not a finite number",
                  "a NaN factor")
    mx = [rank_input(torch.float64, (4,), ("max",), r) for r in range(n)]
    expected, tol = reduce_exact(mx, "max", torch.float64)
    c.close(kt.allreduce(mx[me], op=kt.Max, postscale_factor=-3.0), expected * -3.0, tol, "Max with postscale")


# ---- reducescatter -------------------------------------------------------
def my_rows(rows, n, me):
    """(first row, rows) of rank me: rank r takes rows r, r + n, ... in count."""
    counts = [len(range(r, rows, n)) for r in range(n)]
    return sum(counts[:me]), counts[me]


def check_reducescatter(c, n, me):
    for dtype in SCALED_TYPES:
        for op in OPS if dtype != torch.int16 else ("sum",):
            kop = kt.Sum if op == "sum" else kt.Average
            for rows in (0, 1, n - 1, 2 * n + 1, 7):
                case = ("rs", str(dtype), op, rows)
                xs = [rank_input(dtype, (rows, 3), case, r) for r in range(n)]
                start, count = my_rows(rows, n, me)
                scales = factors(dtype) if rows % 2 else (1.0, 1.0)
                e, tol = scaled_exact(xs, op, dtype, *scales)
                out = kt.reducescatter(xs[me], op=kop, prescale_factor=scales[0], postscale_factor=scales[1])
                what = "reducescatter %s %s, %d rows, x%g /x%g" % (dtype, op, rows, *scales)
                c.close(out, e[start:start + count], tol[start:start + count], what)
    check_reducescatter_forms(c, n, me)


def check_reducescatter_forms(c, n, me):
    types = (torch.float64, torch.int8, torch.float16, torch.int64)
    shapes = ((2 * n + 1, 2, 2), (n + 2,), (3, 5), (1, 4))
    xs = [[rank_input(d, s, ("rsg", str(d)), r) for r in range(n)] for d, s in zip(types, shapes)]
    for name, async_ in (("grouped_reducescatter", False), ("grouped_reducescatter_async", True)):
        call = kt.grouped_reducescatter_async if async_ else kt.grouped_reducescatter
        outs = call([x[me] for x in xs], op=kt.Sum, prescale_factor=3, postscale_factor=-1)
        outs = kt.synchronize(outs) if async_ else outs
        for d, x, out in zip(types, xs, outs):
            e, tol = scaled_exact(x, "sum", d, 3, -1)
            start, count = my_rows(x[0].shape[0], n, me)
            c.close(out, e[start:start + count], tol[start:start + count], "%s %s" % (name, d))
    e, tol = reduce_exact(xs[0], "avg", torch.float64)
    start, count = my_rows(xs[0][0].shape[0], n, me)
    c.close(kt.synchronize(kt.reducescatter_async(xs[0][me])), e[start:start + count], tol[start:start + count],
            "reducescatter_async, Average by default")
    check_refused(c, lambda: kt.reducescatter(torch.tensor(1.0)), ValueError, "no first dimension", "a 0-d tensor")
    check_refused(c, lambda: kt.reducescatter(torch.ones(2), op=kt.Max), ValueError, "sums (Sum) or averages",
                  "reducescatter with Max")
    check_refused(c, lambda: kt.reducescatter(torch.ones(2, dtype=torch.bool), op=kt.Sum), TypeError,
                  "kolo has no type for torch.bool", "reducescatter of bool")


# ---- gathers ---------------------------------------------------------------
def check_gathers(c, n, me):
    types = NATIVE + (torch.int16, torch.bool, torch.complex128)
    xs = [[rank_input(d, (r, 3) if i % 2 else (r + 1,), ("ga", str(d)), r) for r in range(n)]
          for i, d in enumerate(types)]
    outs = kt.grouped_allgather([x[me] for x in xs])
    for d, x, out in zip(types, xs, outs):
        c.equal(out, torch.cat(x), "grouped_allgather %s, rank r gives r (+1) rows" % d)
    outs = kt.synchronize(kt.grouped_allgather_async([x[me] for x in xs[:3]]))
    c.true(len(outs) == 3 and all(torch.equal(o, torch.cat(x)) for o, x in zip(outs, xs)), "grouped_allgather_async")
    c.true(kt.grouped_allgather([]) == [], "grouped_allgather of no tensors")
    objs = kt.allgather_object({"rank": me, "data": list(range(me * 50))})
    c.true(objs == [{"rank": r, "data": list(range(r * 50))} for r in range(n)], "allgather_object", str(objs)[:80])


# ---- DistributedOptimizer --------------------------------------------------
def grads_after_step(n_params, grad_of_rank, me, **kwargs):
    """The gradients DistributedOptimizer leaves (synchronize()) when rank r's are grad_of_rank(r)."""
    w = torch.nn.Parameter(torch.zeros(n_params, dtype=torch.float32))
    opt = kt.DistributedOptimizer(torch.optim.SGD([w], lr=0.0), named_parameters=[("w", w)], **kwargs)
    (w * grad_of_rank(me)).sum().backward()
    opt.synchronize()
    return w.grad.clone()


def check_optimizer(c, n, me):
    big = lambda r: torch.full((4,), 40000.0)  # noqa: E731 - float16 holds it, not the sum of two
    g = grads_after_step(4, big, me, compression=kt.Compression.fp16, gradient_predivide_factor=4.0)
    c.true(torch.equal(g, torch.full((4,), 40000.0)), "predivide 4: an fp16 average of 40000", str(g.tolist()))
    one = lambda r: torch.ones(2)  # noqa: E731 - 2^-30 is below float16's least value, 2^-24
    g = grads_after_step(2, one, me, compression=kt.Compression.fp16, gradient_predivide_factor=2.0 ** 30)
    c.true(torch.equal(g, torch.zeros(2)), "predivide 2^30: the gradient is divided before it travels as fp16",
           str(g.tolist()))
    ranks = lambda r: rank_input(torch.float32, (6,), ("pre",), r)  # noqa: E731
    e, tol = reduce_exact([ranks(r) for r in range(n)], "avg", torch.float32)
    g = grads_after_step(6, ranks, me, gradient_predivide_factor=3.0)
    c.close(g, e, 4 * tol + 1e-6, "predivide 3: the average")
    fine = lambda r: torch.full((3,), 1.0 + 2.0 ** -10)  # noqa: E731 - bfloat16 rounds it to 1
    c.true(torch.equal(grads_after_step(3, fine, me, compression=kt.Compression.bf16), torch.ones(3)),
           "Compression.bf16: gradients travel as bfloat16")
    c.true(torch.equal(grads_after_step(3, fine, me), fine(0)), "Compression.none keeps them")
    for kwargs, words in (({"op": kt.Sum, "gradient_predivide_factor": 2.0}, "needs op Average"),
                          ({"gradient_predivide_factor": 0.0}, "not a finite number above 0")):
        check_refused(c, lambda: kt.DistributedOptimizer(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1),
                                                         **kwargs), ValueError, words, str(kwargs))
    check_sparse(c, n, me)


def embedding_step(me, sparse_as_dense):
    torch.manual_seed(5)
    emb = torch.nn.Embedding(10, 3, sparse=True).double()
    opt = kt.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=0.0), named_parameters=emb.named_parameters(),
                                  sparse_as_dense=sparse_as_dense)
    emb(torch.tensor([me % 10, 7])).sum().backward()
    opt.synchronize()
    return emb.weight.grad


def check_sparse(c, n, me):
    expected = torch.zeros(10, 3, dtype=torch.float64)
    for r in range(n):
        expected[r % 10] += 1.0 / n
        expected[7] += 1.0 / n
    c.close(embedding_step(me, True), expected, torch.full_like(expected, 1e-12), "sparse_as_dense: an embedding")
    check_refused(c, lambda: embedding_step(me, False), RuntimeError, "pass sparse_as_dense=True",
                  "a sparse gradient without sparse_as_dense")


# ---- SyncBatchNorm -----------------------------------------------------------
BN_ROWS = (3, 0, 1, 4)  # rank r's batch; one rank only: 3 rows


def bn_batches(shape_rest, dtype, step, n):
    return [rank_input(torch.float64, (BN_ROWS[r],) + shape_rest, ("bn", step, shape_rest), r).to(dtype)
            for r in range(n)]


def bn_pair(shape_rest, dtype, momentum):
    kind = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm2d}[len(shape_rest)]
    ref = kind(shape_rest[0], momentum=momentum).to(dtype)
    sync = kt.SyncBatchNorm(shape_rest[0], momentum=momentum).to(dtype)
    with torch.no_grad():
        for m in (ref, sync):
            m.weight.copy_(torch.linspace(0.5, 2.0, shape_rest[0]))
            m.bias.copy_(torch.linspace(-1.0, 1.0, shape_rest[0]))
    return ref, sync


def check_sync_batch_norm(c, n, me):
    cases = (((3, 5), torch.float64, 0.1, 1e-10), ((2, 3, 2), torch.float64, None, 1e-10),
             ((3, 5), torch.float32, 0.1, 2e-5))
    for shape_rest, dtype, momentum, tol in cases:
        ref, sync = bn_pair(shape_rest, dtype, momentum)
        what = "SyncBatchNorm %s %s momentum %s" % (shape_rest, dtype, momentum)
        for step in range(2):
            bn_step(c, n, me, ref, sync, bn_batches(shape_rest, dtype, step, n), tol, "%s, step %d" % (what, step))
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            got, want = getattr(sync, name), getattr(ref, name)
            want = want.double() if want.is_floating_point() else want
            c.close(got, want, tol * (1 + want.abs()), "%s: %s" % (what, name))
        ref.eval(), sync.eval()
        x = bn_batches(shape_rest, dtype, 9, n)
        want = ref(torch.cat(x))[sum(BN_ROWS[:me]):][:BN_ROWS[me]].double()
        c.close(sync(x[me]), want, tol * (1 + want.abs()), what + ", eval")


def bn_step(c, n, me, ref, sync, xs, tol, what):
    start, rows = sum(BN_ROWS[:me]), BN_ROWS[me]
    weights = [rank_input(xs[0].dtype, x.shape, ("bn-loss", what), r) for r, x in enumerate(xs)]
    whole = torch.cat(xs).requires_grad_()
    out_ref = ref(whole)
    (out_ref * torch.cat(weights)).sum().backward()
    mine = xs[me].clone().requires_grad_()
    out = sync(mine)
    (out * weights[me]).sum().backward()
    close = lambda got, want, what_: c.close(got, want.double(), tol * (1 + want.double().abs()), what_)  # noqa: E731
    close(out, out_ref[start:start + rows].detach(), what + ": output")
    close(mine.grad, whole.grad[start:start + rows], what + ": input gradient")
    for name in ("weight", "bias"):  # this rank's share; their sum is the whole batch's
        close(kt.allreduce(getattr(sync, name).grad, op=kt.Sum), getattr(ref, name).grad, "%s: %s gradient summed" %
              (what, name))
    ref.zero_grad(), sync.zero_grad()


# ---- Adasum ---------------------------------------------------------------------
def check_adasum(c, n, me):
    for dtype in (torch.float32, torch.float64):
        for shape in ((0,), (1,), (7,), (33, 5)):
            case = ("adasum", str(dtype), shape)
            xs = [adasum_input(dtype, shape, case, r) for r in range(n)]
            e, tol = adasum_exact(xs)
            what = "Adasum %s %s" % (dtype, shape)
            c.close(kt.allreduce(xs[me], op=kt.Adasum), e, tol, "allreduce " + what)
            t = xs[me].clone()
            c.true(kt.allreduce_(t, op=kt.Adasum) is t, "allreduce_ returns its tensor " + what)
            c.close(t, e, tol, "allreduce_ " + what)
            c.close(kt.synchronize(kt.allreduce_async(xs[me], op=kt.Adasum)), e, tol, "allreduce_async " + what)
            c.close(kt.allreduce(xs[me], op=kt.Adasum, prescale_factor=2.0, postscale_factor=0.25), e / 2, tol / 2,
                    "allreduce x2 /x0.25 " + what)
    ys = [[adasum_input(torch.float32, (k + 3,), ("adasum-grouped", k), r) for r in range(n)] for k in range(3)]
    outs = kt.synchronize(kt.grouped_allreduce_async([y[me] for y in ys], op=kt.Adasum))
    for k, (out, y) in enumerate(zip(outs, ys)):
        c.close(out, *adasum_exact(y), "grouped_allreduce_async Adasum, tensor %d (each its own)" % k)
    x = adasum_input(torch.float32, (4, 3), ("adasum-t",), me).t()  # not contiguous
    c.close(kt.allreduce(x, op=kt.Adasum),
            *adasum_exact([adasum_input(torch.float32, (4, 3), ("adasum-t",), r).t() for r in range(n)]),
            "allreduce Adasum of a transposed tensor")
    check_refused(c, lambda: kt.allreduce(torch.ones(3, dtype=torch.int32), op=kt.Adasum), TypeError,
                  "combines floating-point tensors", "Adasum of int32")
    check_adasum_optimizer(c, n, me)


def check_adasum_optimizer(c, n, me):
    """SGD(lr): each rank's delta is -lr * its gradient; the parameter after
    step() is its start plus the Adasum of the deltas, the same on every rank."""
    case = ("adasum-opt",)
    grads = [adasum_input(torch.float32, (6,), case, r) for r in range(n)]
    start = torch.linspace(-1.0, 1.0, 6)
    w = torch.nn.Parameter(start.clone())
    opt = kt.DistributedOptimizer(torch.optim.SGD([w], lr=0.5), named_parameters=[("w", w)], op=kt.Adasum)
    (w * grads[me]).sum().backward()
    opt.step()
    delta, tol = adasum_exact([-0.5 * g for g in grads])
    c.close(w.detach(), start.double() + delta, tol + 1e-6, "DistributedOptimizer(op=Adasum) SGD step")
    check_refused(c, lambda: kt.DistributedOptimizer(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1),
                                                     op=kt.Adasum, gradient_predivide_factor=2.0),
                  ValueError, "Adasum divides nothing", "Adasum with a predivide factor")


def main():
    fake_hosts()
    kt.init()
    n, me = kt.size(), kt.rank()
    c = Checks(me)
    for part in (check_topology, check_barrier, check_scaled_allreduce, check_scaled_grouped, check_scale_refusals,
                 check_reducescatter, check_gathers, check_optimizer, check_sync_batch_norm, check_adasum):
        part(c, n, me)
    kt.shutdown()
    return c.summary()


if __name__ == "__main__":
    sys.exit(main())
