"""name=: named calls matched by name, as Horovod's negotiation does.
Each rank makes its named calls in its own seeded order and
synchronizes them in another; every result is checked against the
reference each rank computes itself (reference.py, float64 / int64):
  - allreduce_async (every dtype kolo.torch reduces; Sum, bool Max),
    grouped_allreduce_async, Adasum, allgather_async (uneven rows, 0 too) and
    broadcast_async_ (roots in turn), tensors of random uneven shapes;
  - poll() on a named handle until it is done;
  - a rank in an unnamed barrier while the others synchronize a named
    call every rank has made: it runs, then the barrier;
  - the same name made twice before it ran: refused on that rank;
  - every rank blocked on a name no other rank made (or in an unnamed
    call): every rank fails at once, naming every rank's call; the same name for an allreduce and an
    allgather: every rank fails, naming both calls; the job goes on;
  - a joined rank (join()) replaying named calls made in other orders; a
    named reducescatter refused while a rank is joined; join() refused
    while a named call is pending;
  - a blocking named call matching an async one of the same name.
Run under mpirun with 1..4 ranks; prints "rank r: N checks, M failed"."""
import sys
import time

import torch

import kolo.torch as kt
from reference import FLOATS, INTS, Checks, adasum_exact, adasum_input, generator, rank_input, reduce_exact

TYPES = FLOATS + INTS + (torch.bool, torch.complex64, torch.complex128)


def shuffled(items, *seed):
    return [items[i] for i in torch.randperm(len(items), generator=generator(*seed)).tolist()]


def shape(*case):
    g = generator("shape", *case)
    return tuple(int(v) for v in torch.randint(1, 13, (2,), generator=g))


class Call:
    """A named call: make() issues it on this rank; check() its result."""

    def __init__(self, name, make, check):
        self.name, self.make, self.check, self.handle = name, make, check, None


def reduce_call(c, n, me, dtype):
    name, op = "reduce.%s" % dtype, ("max" if dtype == torch.bool else "sum")
    xs = [rank_input(dtype, shape(name), (name,), r) for r in range(n)]
    expected, tol = reduce_exact(xs, op, dtype)
    return Call(name, lambda: kt.allreduce_async(xs[me], op=kt.Max if op == "max" else kt.Sum, name=name),
                lambda out: c.close(out, expected, tol, "named allreduce_async %s" % dtype))


def gather_call(c, n, me, dtype):
    name, cols = "gather.%s" % dtype, shape("gather", dtype)[1]
    xs = [rank_input(dtype, ((r + len(name)) % 3, cols), (name,), r) for r in range(n)]
    return Call(name, lambda: kt.allgather_async(xs[me], name=name),
                lambda out: c.equal(out, torch.cat(xs), "named allgather_async %s" % dtype))


def broadcast_call(c, n, me, dtype, i):
    name, root = "bcast.%s" % dtype, i % n
    x = rank_input(dtype, shape(name), (name,), root)
    mine = x.clone() if me == root else torch.zeros_like(x)
    return Call(name, lambda: kt.broadcast_async_(mine, root, name=name),
                lambda out: c.equal(out, x, "named broadcast_async_ %s from rank %d" % (dtype, root)))


def grouped_call(c, n, me):
    name, types = "grouped", (torch.float32, torch.int64, torch.float64)
    xs = [[rank_input(d, shape(name, str(d)), (name, str(d)), r) for d in types] for r in range(n)]
    refs = [reduce_exact([xs[r][j] for r in range(n)], "avg", d) for j, d in enumerate(types)]

    def check(outs):
        for d, out, (e, tol) in zip(types, outs, refs):
            c.close(out, e, tol, "named grouped_allreduce_async %s" % d)
    return Call(name, lambda: kt.grouped_allreduce_async([x.clone() for x in xs[me]], name=name), check)


def adasum_call(c, n, me):
    xs = [adasum_input(torch.float64, shape("adasum"), ("adasum",), r) for r in range(n)]
    expected, tol = adasum_exact(xs)
    return Call("adasum", lambda: kt.allreduce_async(xs[me], op=kt.Adasum, name="adasum"),
                lambda out: c.close(out, expected, tol, "named allreduce_async Adasum"))


def check_orders(c, n, me):
    """Every rank makes the calls in its own order, then synchronizes them in another."""
    calls = [reduce_call(c, n, me, d) for d in TYPES] + [gather_call(c, n, me, d) for d in TYPES]
    calls += [broadcast_call(c, n, me, d, i) for i, d in enumerate(TYPES)]
    calls += [grouped_call(c, n, me), adasum_call(c, n, me)]
    for call in shuffled(calls, "make", me):
        call.handle = call.make()
    for call in shuffled(calls, "sync", me):
        call.check(kt.synchronize(call.handle))


def check_poll_and_mixed(c, n, me):
    xs = [rank_input(torch.float64, (5,), ("poll",), r) for r in range(n)]
    expected, tol = reduce_exact(xs, "sum", torch.float64)
    h = kt.allreduce_async(xs[me], op=kt.Sum, name="polled")
    while not kt.poll(h):
        pass
    c.close(kt.synchronize(h), expected, tol, "named allreduce_async, polled until done")
    # rank 0 enters a barrier while the others wait for "mixed": it runs first
    h = kt.allreduce_async(xs[me], op=kt.Sum, name="mixed")
    if me == 0:
        kt.barrier()
        out = kt.synchronize(h)
    else:
        out = kt.synchronize(h)
        kt.barrier()
    c.close(out, expected, tol, "named allreduce_async around an unnamed barrier")
    c.close(kt.allreduce(xs[me], op=kt.Sum, name="blocking"), expected, tol, "named blocking allreduce")
    if me == 0:  # a blocking call and an async one of the same name match
        out = kt.allreduce(xs[me], op=kt.Sum, name="forms")
    else:
        out = kt.synchronize(kt.allreduce_async(xs[me], op=kt.Sum, name="forms"))
    c.close(out, expected, tol, "named allreduce on rank 0, allreduce_async on the others")


def check_duplicate(c, n, me):
    x = rank_input(torch.float32, (4,), ("dup",), me)
    h = kt.allreduce_async(x, op=kt.Sum, name="dup")
    try:
        kt.allreduce_async(x, op=kt.Sum, name="dup")
        c.true(n == 1, "a name pending twice is refused")
    except ValueError as e:
        c.true("name='dup'" in str(e) and "pending" in str(e), "a name pending twice is refused in words", str(e))
    expected, tol = reduce_exact([rank_input(torch.float32, (4,), ("dup",), r) for r in range(n)], "sum",
                                 torch.float32)
    c.close(kt.synchronize(h), expected, tol, "the first call of the name still runs")


def check_refused(c, call, words, what):
    t0 = time.monotonic()
    try:
        call()
        c.true(False, "refused: " + what)
    except kt.KoloError as e:
        c.true(all(w in str(e) for w in words), "refused in words: " + what, str(e))
    c.true(time.monotonic() - t0 < 10, "refused at once: " + what, "%.1f s" % (time.monotonic() - t0))


def check_deadlock(c, n, me):
    if n < 2:
        return
    x = torch.ones(3)
    check_refused(c, lambda: kt.allreduce(x, name="lone.%d" % me),
                  ["cannot be matched"] + ["allreduce(name='lone.%d')" % r for r in range(n)],
                  "every rank waits for a name no other rank made")
    lone = (lambda: kt.allreduce(x, name="solo")) if me == 0 else (lambda: kt.allreduce(x))
    words = ("cannot be matched", "allreduce(name='solo'), which rank", "rank 1 calls kolo.torch.allreduce")
    check_refused(c, lone, words, "rank 0 waits for a name, the others in an unnamed call")
    mine = (lambda: kt.allgather(x, name="kinds")) if me == 1 else (lambda: kt.allreduce(x, name="kinds"))
    check_refused(c, mine, ("calls do not match", "kolo.torch.allreduce", "kolo.torch.allgather", "'kinds'"),
                  "an allreduce and an allgather of one name")
    kt.barrier()  # and the job goes on


def check_joined(c, n, me):
    """Rank n-1 joins; the others make named calls in their own orders."""
    active = list(range(n - 1)) if n > 1 else [0]
    names = ["joined.%d" % i for i in range(4)]
    xs = {nm: [rank_input(torch.float64, shape(nm), (nm,), r) if r in active else
               torch.zeros(shape(nm), dtype=torch.float64) for r in range(n)] for nm in names}
    if me in active:
        handles = {nm: kt.allreduce_async(xs[nm][me], op=kt.Sum, name=nm) for nm in shuffled(names, "jm", me)}
        rows = [rank_input(torch.float32, (r % 2 + 1, 3), ("jg",), r) for r in active]
        gathered = kt.allgather_async(rows[me], name="joined.gather")
        for nm in shuffled(names, "js", me):
            c.close(kt.synchronize(handles[nm]), *reduce_exact(xs[nm], "sum", torch.float64),
                    "named allreduce_async with a joined rank: %s" % nm)
        c.equal(kt.synchronize(gathered), torch.cat(rows), "named allgather_async with a joined rank")
    if me in active and n > 1:  # a job of one rank runs named calls at once: none is pending
        early = kt.allreduce_async(xs[names[0]][me], op=kt.Sum, name="joined.early")
        try:
            kt.join()
            c.true(False, "join() with a named call pending is refused")
        except RuntimeError as e:
            c.true("synchronize" in str(e), "join() with a named call pending is refused in words", str(e))
        c.close(kt.synchronize(early), *reduce_exact(xs[names[0]], "sum", torch.float64), "the pending call runs")
        scatter = kt.reducescatter_async(torch.ones(n, 2), name="joined.scatter")
        check_refused(c, lambda: kt.synchronize(scatter), ("kolo.torch.reducescatter_async", "joined"),
                      "a named reducescatter with a joined rank")
    last = kt.join()
    c.true(last == active[-1], "join() after named calls", "%d, not %d" % (last, active[-1]))


def main():
    kt.init()
    n, me = kt.size(), kt.rank()
    c = Checks(me)
    for part in (check_orders, check_poll_and_mixed, check_duplicate, check_deadlock, check_joined):
        part(c, n, me)
    kt.shutdown()
    return c.summary()


if __name__ == "__main__":
    sys.exit(main())
