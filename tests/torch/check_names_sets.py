"""name= on a process set other than the global one: the set of the first
and the last rank (on 3 ranks, job ranks 0 and 2: its own ranks 0 and 1,
so sentences must name job ranks), matched among its ranks by name:
  - its ranks make named calls in their own seeded orders and synchronize
    them in another: allreduce_async (float32, float64, int32, bfloat16),
    grouped_allreduce_async, Adasum, allgather_async (uneven rows, 0 too),
    broadcast_async_ from a job rank, each against the reference every rank
    computes itself (float64 / int64);
  - a set rank in an unnamed barrier of the set while the other waits for
    a named call of the set: it runs, then the barrier;
  - one name pending on the set and on the global set at once: each runs
    with its own peers (the rank outside the set has the global one only);
  - a name pending twice in the set: refused on that rank;
  - each set rank waiting for a name only it made: both fail at once,
    naming the set and the job ranks; one name for an allreduce and an
    allgather: refused naming both calls and job ranks; unnamed calls that
    differ on the set's ranks: refused too (the set's control round);
  - the job goes on: a global barrier, the set removed.
Run under mpirun with 2..4 ranks; prints "rank r: N checks, M failed"."""
import sys

import torch

import kolo.torch as kt
from check_names import Call, check_refused, shape, shuffled
from reference import Checks, adasum_exact, adasum_input, rank_input, reduce_exact

TYPES = (torch.float32, torch.float64, torch.int32, torch.bfloat16)


def set_calls(c, ps, me):
    """The named calls of the set's ranks, inputs indexed by job rank."""
    ranks, calls = ps.ranks, []
    for d in TYPES:
        name = "s.reduce.%s" % d
        xs = {r: rank_input(d, shape(name), (name,), r) for r in ranks}
        ref = reduce_exact([xs[r] for r in ranks], "sum", d)
        calls.append(Call(name, lambda x=xs[me], nm=name: kt.allreduce_async(x, op=kt.Sum, name=nm, process_set=ps),
                          lambda out, ref=ref, d=d: c.close(out, *ref, "set's named allreduce_async %s" % d)))
        name = "s.gather.%s" % d
        rows = {r: rank_input(d, ((r + len(name)) % 3, 4), (name,), r) for r in ranks}
        calls.append(Call(name, lambda x=rows[me], nm=name: kt.allgather_async(x, name=nm, process_set=ps),
                          lambda out, rows=rows, d=d: c.equal(out, torch.cat([rows[r] for r in ranks]),
                                                              "set's named allgather_async %s" % d)))
    root = ranks[-1]
    x = rank_input(torch.float64, shape("s.bcast"), ("s.bcast",), root)
    mine = x.clone() if me == root else torch.zeros_like(x)
    calls.append(Call("s.bcast", lambda: kt.broadcast_async_(mine, root, name="s.bcast", process_set=ps),
                      lambda out: c.equal(out, x, "set's named broadcast_async_ from job rank %d" % root)))
    ys = {r: adasum_input(torch.float64, shape("s.adasum"), ("s.adasum",), r) for r in ranks}
    ada = adasum_exact([ys[r] for r in ranks])
    calls.append(Call("s.adasum", lambda: kt.allreduce_async(ys[me], op=kt.Adasum, name="s.adasum", process_set=ps),
                      lambda out: c.close(out, *ada, "set's named allreduce_async Adasum")))
    gs = {r: [rank_input(d, shape("s.grouped", str(d)), ("s.grouped", str(d)), r) for d in TYPES[:2]] for r in ranks}
    grefs = [reduce_exact([gs[r][j] for r in ranks], "avg", d) for j, d in enumerate(TYPES[:2])]

    def grouped_check(outs):
        for out, ref in zip(outs, grefs):
            c.close(out, *ref, "set's named grouped_allreduce_async")
    calls.append(Call("s.grouped", lambda: kt.grouped_allreduce_async([g.clone() for g in gs[me]], name="s.grouped",
                                                                      process_set=ps), grouped_check))
    return calls


def check_orders(c, ps, me):
    calls = set_calls(c, ps, me)
    for call in shuffled(calls, "set make", me):
        call.handle = call.make()
    for call in shuffled(calls, "set sync", me):
        call.check(kt.synchronize(call.handle))


def check_mixed(c, ps, me):
    xs = [rank_input(torch.float64, (5,), ("s.mixed",), r) for r in ps.ranks]
    expected, tol = reduce_exact(xs, "sum", torch.float64)
    h = kt.allreduce_async(xs[ps.rank()], op=kt.Sum, name="s.mixed", process_set=ps)
    if me == ps.ranks[0]:  # in the set's barrier while the other waits for the name: it runs first
        kt.barrier(process_set=ps)
        out = kt.synchronize(h)
    else:
        out = kt.synchronize(h)
        kt.barrier(process_set=ps)
    c.close(out, expected, tol, "set's named allreduce_async around the set's unnamed barrier")
    h = kt.allreduce_async(xs[ps.rank()], op=kt.Sum, name="s.dup", process_set=ps)
    try:
        kt.allreduce_async(xs[ps.rank()], op=kt.Sum, name="s.dup", process_set=ps)
        c.true(False, "a name pending twice in a set is refused")
    except ValueError as e:
        c.true("name='s.dup'" in str(e) and "process set %d" % ps.process_set_id in str(e),
               "a name pending twice in a set is refused in words", str(e))
    c.close(kt.synchronize(h), expected, tol, "the first call of the set's name still runs")


def check_shared_name(c, ps, n, me):
    """One name pending on the set and on the global set: each with its own peers."""
    xs = [rank_input(torch.float32, (7,), ("shared",), r) for r in range(n)]
    glob = reduce_exact(xs, "sum", torch.float32)
    mine = reduce_exact([xs[r] for r in ps.ranks], "sum", torch.float32)
    hs = kt.allreduce_async(xs[me], op=kt.Sum, name="shared", process_set=ps) if ps.included() else None
    hg = kt.allreduce_async(xs[me], op=kt.Sum, name="shared")
    c.close(kt.synchronize(hg), *glob, "the global set's call of a name also pending on a set")
    if hs is not None:
        c.close(kt.synchronize(hs), *mine, "the set's call of a name also pending on the global set")


def check_refusals(c, ps, me):
    x, other = torch.ones(3), ps.ranks[1]
    words = ["cannot be matched", "process set %d" % ps.process_set_id] + [
        "rank %d waits for kolo.torch.allreduce(name='s.lone.%d')" % (r, r) for r in ps.ranks]
    check_refused(c, lambda: kt.allreduce(x, name="s.lone.%d" % me, process_set=ps), words,
                  "each set rank waits for a name only it made")
    mine = (lambda: kt.allgather(x, name="s.kinds", process_set=ps)) if me == other else (
        lambda: kt.allreduce(x, name="s.kinds", process_set=ps))
    check_refused(c, mine, ("calls do not match", "rank %d calls kolo.torch.allreduce" % ps.ranks[0],
                            "rank %d calls kolo.torch.allgather" % other, "'s.kinds'"),
                  "an allreduce and an allgather of one name on a set")
    plain = (lambda: kt.allgather(x, process_set=ps)) if me == other else (lambda: kt.allreduce(x, process_set=ps))
    check_refused(c, plain, ("calls do not match", "rank %d calls kolo.torch.allgather" % other),
                  "unnamed calls that differ on a set")


def main():
    kt.init()
    n, me = kt.size(), kt.rank()
    c = Checks(me)
    ps = kt.add_process_set([0, n - 1])
    if ps.included():
        for part in (check_orders, check_mixed, check_refusals):
            part(c, ps, me)
    check_shared_name(c, ps, n, me)
    kt.barrier()
    c.true(kt.remove_process_set(ps), "the set removed")
    kt.shutdown()
    return c.summary()


if __name__ == "__main__":
    sys.exit(main())
