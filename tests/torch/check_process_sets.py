"""Process sets (Horovod's): every collective of kolo.torch with
process_set= a subset of the ranks (the even ranks; {0, 2, 3} or the
ranks but 0), against a reference each rank computes itself (reference.py:
exact int64, float64 with a bound on rounding); uneven sizes where a call
takes them; a rank outside a set refused with its sentence; sets that
differ between ranks refused; DistributedOptimizer over a set against one
process training on the union of the set's batches; remove then add
again; init(process_sets=...).  Run under mpirun; prints
"rank r: N checks, M failed"."""
import os
import sys

import torch

import kolo.torch as kt
from models import batch, loss_fn, mlp
from reference import Checks, rank_input, reduce_exact


def inputs(ps, dtype, shape, case):
    return [rank_input(dtype, shape, case, r) for r in ps.ranks]


def check_reductions(c, ps, me):
    mine = ps.ranks.index(me)
    xs = inputs(ps, torch.int64, (5, 3), ("ps-sum", ps.ranks))
    exact, _ = reduce_exact(xs, "sum", torch.int64)
    fs = inputs(ps, torch.float64, (7,), ("ps-avg", ps.ranks))
    avg, tol = reduce_exact(fs, "avg", torch.float64)
    c.close(kt.allreduce(xs[mine], op=kt.Sum, process_set=ps), exact, 0, "allreduce Sum %s" % ps)
    c.close(kt.allreduce(fs[mine], process_set=ps), avg, tol, "allreduce Average %s" % ps)
    c.close(kt.allreduce_(xs[mine].clone(), op=kt.Sum, process_set=ps), exact, 0, "allreduce_ %s" % ps)
    h = kt.allreduce_async(fs[mine], process_set=ps)
    c.close(kt.synchronize(h), avg, tol, "allreduce_async %s" % ps)
    h = kt.allreduce_async_(xs[mine].clone(), op=kt.Sum, process_set=ps)
    c.close(kt.synchronize(h), exact, 0, "allreduce_async_ %s" % ps)
    for fn in (kt.grouped_allreduce, kt.grouped_allreduce_):
        got = fn([xs[mine].clone(), fs[mine].clone()], op=kt.Sum, process_set=ps)
        c.close(got[0], exact, 0, "%s %s" % (fn.__name__, ps))
        c.close(got[1], *reduce_exact(fs, "sum", torch.float64), "%s float64 %s" % (fn.__name__, ps))
    got = kt.synchronize(kt.grouped_allreduce_async([xs[mine]], op=kt.Sum, process_set=ps))
    c.close(got[0], exact, 0, "grouped_allreduce_async %s" % ps)


def check_scatters(c, ps, me):
    n, mine = len(ps.ranks), ps.ranks.index(me)
    rows = 2 * n + 1  # uneven: the first rows % n ranks get one more
    xs = inputs(ps, torch.int64, (rows, 2), ("ps-rs", ps.ranks))
    total, _ = reduce_exact(xs, "sum", torch.int64)
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    start = sum(counts[:mine])
    expected = total[start:start + counts[mine]]
    c.close(kt.reducescatter(xs[mine], op=kt.Sum, process_set=ps), expected, 0, "reducescatter %s" % ps)
    got = kt.grouped_reducescatter([xs[mine], xs[mine]], op=kt.Sum, process_set=ps)
    c.close(got[1], expected, 0, "grouped_reducescatter %s" % ps)


def check_copies(c, ps, me):
    mine = ps.ranks.index(me)
    parts = [rank_input(torch.int32, (r + 1, 2), ("ps-ag",), r) for r in ps.ranks]  # uneven rows
    c.equal(kt.allgather(parts[mine], process_set=ps), torch.cat(parts), "allgather %s" % ps)
    got = kt.grouped_allgather([parts[mine], parts[mine] * 2], process_set=ps)
    c.equal(got[1], torch.cat(parts) * 2, "grouped_allgather %s" % ps)
    c.equal(kt.synchronize(kt.allgather_async(parts[mine], process_set=ps)), torch.cat(parts),
            "allgather_async %s" % ps)
    for root in ps.ranks:  # root_rank: a rank of the job
        x = rank_input(torch.float32, (4,), ("ps-bc",), me)
        ref = rank_input(torch.float32, (4,), ("ps-bc",), root)
        c.equal(kt.broadcast(x, root, process_set=ps), ref, "broadcast from %d %s" % (root, ps))
        c.equal(kt.synchronize(kt.broadcast_async_(x, root, process_set=ps)), ref, "broadcast_async_ %s" % ps)
    check_alltoall(c, ps, mine)
    objs = kt.allgather_object({"rank": me}, process_set=ps)
    c.true(objs == [{"rank": r} for r in ps.ranks], "allgather_object %s" % ps, str(objs))
    obj = kt.broadcast_object(("from", me), root_rank=ps.ranks[-1], process_set=ps)
    c.true(obj == ("from", ps.ranks[-1]), "broadcast_object %s" % ps, str(obj))
    kt.barrier(process_set=ps)


def check_alltoall(c, ps, mine):
    n = len(ps.ranks)
    splits = [(mine + j) % 3 for j in range(n)]  # rows from set rank i to set rank j: (i + j) % 3
    data = torch.arange(sum(splits), dtype=torch.int64) + 100 * mine
    out, received = kt.alltoall(data, splits=splits, process_set=ps)
    expected = []
    for i in range(n):
        sent = [(i + j) % 3 for j in range(n)]
        start = sum(sent[:mine])
        expected.append(torch.arange(start, start + sent[mine], dtype=torch.int64) + 100 * i)
    c.equal(out, torch.cat(expected), "alltoall uneven %s" % ps)
    c.true(received.tolist() == [(i + mine) % 3 for i in range(n)], "alltoall's rows received", str(received))


def refused(c, call, words, what):
    try:
        call()
    except (ValueError, TypeError) as e:
        c.true(all(w in str(e) for w in words), what, "the sentence was: %s" % e)
    else:
        c.fail(what, "no error")


def check_outsider(c, ps, me):
    """A rank outside the set: every call refused, naming the set and the rank."""
    words = ("rank %d is not in process set %d" % (me, ps.process_set_id), str(ps.ranks))
    t = torch.ones(2 * len(ps.ranks))
    calls = {"allreduce": lambda: kt.allreduce(t, process_set=ps),
             "allreduce_async_": lambda: kt.allreduce_async_(t, process_set=ps),
             "grouped_allreduce": lambda: kt.grouped_allreduce([t], process_set=ps),
             "allgather": lambda: kt.allgather(t, process_set=ps),
             "grouped_allgather": lambda: kt.grouped_allgather([t], process_set=ps),
             "broadcast_": lambda: kt.broadcast_(t, ps.ranks[0], process_set=ps),
             "alltoall": lambda: kt.alltoall(t, process_set=ps),
             "reducescatter": lambda: kt.reducescatter(t, process_set=ps),
             "grouped_reducescatter": lambda: kt.grouped_reducescatter([t], process_set=ps),
             "barrier": lambda: kt.barrier(process_set=ps),
             "DistributedOptimizer": lambda: optimizer_over(mlp(), ps)}
    for name, call in calls.items():
        refused(c, call, ("kolo.torch." + name,) + words, "%s from outside %s" % (name, ps))
    refused(c, ps.rank, ("rank %d is not in" % me,), "rank() from outside")


def optimizer_over(model, ps):
    return kt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), process_set=ps)


def check_optimizer(c, ps, me, steps=5):
    """The set's ranks train on their own batches; one model here on the union of theirs."""
    torch.manual_seed(3)
    model = mlp().double()
    ref = mlp().double()
    ref.load_state_dict(model.state_dict())
    opt, ref_opt = optimizer_over(model, ps), torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(steps):
        x, y = batch("mlp", step, 0, me)
        opt.zero_grad(), ref_opt.zero_grad()
        loss_fn(model, x.double(), y.double()).backward()
        opt.step()
        xs, ys = zip(*(batch("mlp", step, 0, r) for r in ps.ranks))
        loss_fn(ref, torch.cat(xs).double(), torch.cat(ys).double()).backward()
        ref_opt.step()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        c.close(p.detach(), q.detach(), 1e-5, "DistributedOptimizer over %s: %s" % (ps, name))


def check_set(c, ps, me):
    c.true(ps.included() == (me in ps.ranks), "included() %s" % ps)
    c.true(ps.size() == len(ps.ranks), "size() %s" % ps, str(ps.size()))
    if not ps.included():
        return check_outsider(c, ps, me)
    c.true(ps.rank() == ps.ranks.index(me), "rank() %s" % ps, str(ps.rank()))
    for part in (check_reductions, check_scatters, check_copies, check_optimizer):
        part(c, ps, me)
    refused(c, lambda: kt.broadcast(torch.ones(1), -1 if me else 99, process_set=ps),
            ("root_rank", "is not in process set"), "broadcast from outside the set")


def check_lifetime(c, n, me, even):
    c.true(not kt.remove_process_set(kt.global_process_set), "the global set is not removed")
    c.true(kt.global_process_set.ranks == list(range(n)), "global_process_set.ranks")
    refused(c, lambda: kt.add_process_set(list(even.ranks)), ("is added already",), "a set added twice")
    c.true(kt.remove_process_set(even), "remove_process_set")
    c.true(even.size() is None and even.process_set_id is None, "a removed set is no longer added")
    refused(c, lambda: kt.allreduce(torch.ones(1), process_set=even), ("is not added",), "a call with a removed set")
    again = kt.add_process_set(even)
    c.true(again is even and even.process_set_id is not None, "added again", str(even))
    if even.included():
        got = kt.allreduce(torch.tensor([me], dtype=torch.int64), op=kt.Sum, process_set=even)
        c.true(got.item() == sum(even.ranks), "allreduce after adding again", str(got))
    if n > 1:  # each rank adds another set: every rank refuses, none splits
        refused(c, lambda: kt.add_process_set([me]), ("add another process set",), "sets differing between ranks")
    c.true(kt.allreduce(torch.ones(1), op=kt.Sum).item() == n, "the global set after all this")


def main():
    n = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))  # init(process_sets=...) needs the ranks before init
    even = kt.ProcessSet([r for r in range(n) if r % 2 == 0])
    kt.init(process_sets=[even])
    me = kt.rank()
    c = Checks(me)
    sets = [even]
    if n > 1:
        sets.append(kt.add_process_set([0, 2, 3] if n >= 4 else list(range(1, n))))
    for ps in sets:
        check_set(c, ps, me)
    check_lifetime(c, n, me, even)
    kt.shutdown()
    return c.summary()


if __name__ == "__main__":
    sys.exit(main())
