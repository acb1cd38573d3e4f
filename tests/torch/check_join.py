"""kolo.torch.join() with uneven data: each rank makes a seeded random
number of steps (0 too), then joins.  Checked against references every
rank computes itself (reference.py):
  - allreduce Sum and Average (float64, float32, int32; grouped; async)
    and Adasum with a joined rank's zeros, Average dividing by the job's size,
    element by element;
  - allgather without the joined ranks' rows; broadcast from a rank that
    has not joined; barrier;
  - reducescatter and alltoall refused in words while a rank is joined,
    on the ranks that call them, and the job going on afterwards;
  - join()'s value on every rank: the last rank to join (the highest of
    those with the most steps);
  - DistributedOptimizer (SGD with momentum) with uneven batches: a
    joined rank gives zero gradients; after join() and a broadcast from
    the last rank to join, every rank's parameters within 1e-5 of one
    process trained on the same batches;
  - two ranks calling different collectives (or allreduces of different
    shapes, or named differently: name=): every rank fails at once with a
    sentence naming both calls (both names), and the job goes on.
Run under mpirun with 1..4 ranks; prints "rank r: N checks, M failed"."""
import sys
import time

import torch

import kolo.torch as kt
from models import batch, loss_fn, mlp
from reference import Checks, adasum_exact, adasum_input, generator, rank_input, reduce_exact

TYPES = (torch.float64, torch.float32, torch.int32)


def uneven_steps(n, what):
    """Every rank's number of steps (the same list on every rank): 0..3,
    not all alike, one rank at least 1."""
    g = generator("join-steps", what, n)
    steps = torch.randint(0, 4, (n,), generator=g).tolist()
    if n > 1 and len(set(steps)) == 1 or max(steps) == 0:
        steps[int(torch.randint(0, n, (1,), generator=g))] += 1
    return steps


def check_refused(c, call, words, what):
    try:
        call()
        c.true(False, "refused: " + what)
    except kt.KoloError as e:
        c.true(all(w in str(e) for w in words), "refused in words: " + what, str(e))


def reduce_with_zeros(case, dtype, shape, op, active, n):
    """(every rank's input: zeros for a rank that joined, expected, tolerance)."""
    xs = [rank_input(dtype, shape, case, r) if r in active else torch.zeros(shape, dtype=dtype) for r in range(n)]
    return xs, reduce_exact(xs, op, dtype)


def step_collectives(c, n, me, i, active, joined_any):
    for dtype in TYPES:
        for op, kop in (("sum", kt.Sum), ("avg", kt.Average)):
            case = ("join", i, str(dtype), op)
            xs, (expected, tol) = reduce_with_zeros(case, dtype, (3, 5), op, active, n)
            c.close(kt.allreduce(xs[me], op=kop), expected, tol, "step %d allreduce %s %s" % (i, op, dtype))
    xs = [adasum_input(torch.float64, (9,), ("adasum", i), r) if r in active else torch.zeros(9, dtype=torch.float64)
          for r in range(n)]
    c.close(kt.allreduce(xs[me], op=kt.Adasum), *adasum_exact(xs), "step %d allreduce Adasum" % i)
    shapes, types = ((7,), (2, 3)), (torch.float32, torch.int64)
    ref = [reduce_with_zeros(("grouped", i, str(d)), d, s, "sum", active, n) for d, s in zip(types, shapes)]
    outs = kt.grouped_allreduce([xs[me] for xs, _ in ref], op=kt.Sum)
    for d, out, (_, (e, tol)) in zip(types, outs, ref):
        c.close(out, e, tol, "step %d grouped_allreduce %s" % (i, d))
    xs, (e, tol) = reduce_with_zeros(("async", i), torch.float64, (4,), "avg", active, n)
    c.close(kt.synchronize(kt.allreduce_async(xs[me], op=kt.Average)), e, tol, "step %d allreduce_async" % i)
    out = kt.allreduce(xs[me], op=kt.Average, prescale_factor=0.5, postscale_factor=3.0)
    c.close(out, e * 1.5, 2 * tol + 1e-15 * e.abs(), "step %d allreduce Average x0.5 /x3" % i)

    rows = [rank_input(torch.float32, (r % 3, 2), ("gather", i), r) for r in range(n)]
    c.equal(kt.allgather(rows[me]), torch.cat([rows[r] for r in active]), "step %d allgather" % i)
    root = active[i % len(active)]
    x = rank_input(torch.float64, (2, 2), ("bcast", i), root)
    c.equal(kt.broadcast(x if me == root else torch.zeros(2, 2, dtype=torch.float64), root), x,
            "step %d broadcast from rank %d" % (i, root))
    kt.barrier()
    if joined_any:
        check_refused(c, lambda: kt.reducescatter(torch.ones(n, 2)), ("kolo.torch.reducescatter", "joined"),
                      "reducescatter with a joined rank")
        check_refused(c, lambda: kt.alltoall(torch.ones(n, 2)), ("kolo.torch.alltoall", "joined"),
                      "alltoall with a joined rank")


def check_collectives(c, n, me):
    steps = uneven_steps(n, "collectives")
    for i in range(steps[me]):
        active = [r for r in range(n) if steps[r] > i]
        step_collectives(c, n, me, i, active, len(active) < n)
    last = kt.join()
    expected = max(r for r in range(n) if steps[r] == max(steps))
    c.true(last == expected, "join() returns the last rank to join (steps %s)" % steps, "%d, not %d" % (last, expected))
    x = rank_input(torch.float64, (6,), ("after",), me)  # every rank again, none joined
    xs = [rank_input(torch.float64, (6,), ("after",), r) for r in range(n)]
    c.close(kt.allreduce(x, op=kt.Sum), *reduce_exact(xs, "sum", torch.float64), "allreduce after join")


# ---- DistributedOptimizer -----------------------------------------------
def make_model():
    torch.manual_seed(1234)
    return mlp()


def reference_training(steps, n, lr):
    """One process: at step i, the sum of the gradients of the ranks with
    data at step i, divided by the job's size (a joined rank's zeros)."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for i in range(max(steps)):
        opt.zero_grad()
        for r in range(n):
            if steps[r] > i:
                x, y = batch("mlp", i, 0, r)
                (loss_fn(model, x, y) / n).backward()
        opt.step()
    return model


def check_optimizer(c, n, me):
    steps, lr = uneven_steps(n, "optimizer"), 0.1
    model = make_model()
    kt.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = kt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9),
                                  named_parameters=model.named_parameters())
    for i in range(steps[me]):
        opt.zero_grad()
        x, y = batch("mlp", i, 0, me)
        loss_fn(model, x, y).backward()
        opt.step()
    last = kt.join()
    kt.broadcast_parameters(model.state_dict(), root_rank=last)
    ref = dict(reference_training(steps, n, lr).named_parameters())
    for name, p in model.named_parameters():
        c.close(p.detach(), ref[name].detach().double(), torch.full(p.shape, 1e-5, dtype=torch.float64),
                "DistributedOptimizer with uneven data (steps %s): %s" % (steps, name))


def check_mismatch(c, n, me):
    """Rank 0 allreduces while rank 1 broadcasts: both fail, naming both."""
    if n < 2:
        return
    t0 = time.monotonic()
    if me == 0:
        check_refused(c, lambda: kt.allreduce(torch.ones(4)), ("kolo.torch.allreduce", "kolo.torch.broadcast"),
                      "rank 0 allreduce, rank 1 broadcast")
    elif me == 1:
        check_refused(c, lambda: kt.broadcast(torch.ones(4), 1), ("kolo.torch.allreduce", "kolo.torch.broadcast"),
                      "rank 1 broadcast, rank 0 allreduce")
    else:
        check_refused(c, lambda: kt.allreduce(torch.ones(4)), ("kolo.torch.allreduce", "kolo.torch.broadcast"),
                      "a third rank sees the mismatch too")
    shape = (4,) if me == 0 else (5,)
    check_refused(c, lambda: kt.allreduce(torch.ones(shape), op=kt.Sum), ("kolo.torch.allreduce", "differ"),
                  "ranks allreducing different shapes")
    # name=: the same names in the same order run; rank 0 making "b" where
    # the others make "a" fails on every rank, naming both names
    x = rank_input(torch.float64, (3,), ("named",), me)
    xs = [rank_input(torch.float64, (3,), ("named",), r) for r in range(n)]
    c.close(kt.allreduce(x, op=kt.Sum, name="grad.a"), *reduce_exact(xs, "sum", torch.float64), "named allreduce")
    c.close(kt.allreduce(x, kt.Sum, "grad.b"), *reduce_exact(xs, "sum", torch.float64), "named allreduce, positional")
    mine = "grad.b" if me == 0 else "grad.a"
    check_refused(c, lambda: kt.allreduce(x, op=kt.Sum, name=mine), ("name='grad.b'", "name='grad.a'", "order"),
                  "allreduces named differently")
    check_refused(c, lambda: kt.allgather(x, name=mine), ("kolo.torch.allgather(name='grad.", "order"),
                  "allgathers named differently")
    c.true(time.monotonic() - t0 < 10, "a mismatch fails at once", "%.1f s" % (time.monotonic() - t0))
    kt.barrier()  # and the job goes on


def main():
    kt.init()
    n, me = kt.size(), kt.rank()
    c = Checks(me)
    for part in (check_collectives, check_optimizer, check_mismatch):
        part(c, n, me)
    kt.shutdown()
    return c.summary()


if __name__ == "__main__":
    sys.exit(main())
