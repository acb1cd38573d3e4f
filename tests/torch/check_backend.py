"""torch.distributed over the "kolo" backend: every call PyTorch routes to
a process group, on random tensors of every dtype kolo.torch takes, of
sizes 0, 1 and odd (and uneven between ranks where the call allows it),
outputs poisoned first, checked against the exact result each rank
computes from every rank's input (reference.py).  Also new_group of a
subset, the object collectives, barrier, Work and futures, refusals in
words, and a kolo failure raised by wait().

Run on N ranks: mpirun (RANK / WORLD_SIZE from Open MPI's variables,
MASTER_ADDR / MASTER_PORT given) or torchrun's variables (launch.py
--torchrun).  Prints "rank r: N checks, M failed"."""
import datetime
import os
import sys

import torch
import torch.distributed as dist

import kolo.torch  # noqa: F401 - registers the "kolo" backend
from reference import FLOATS, INTS, Checks, generator, rank_input, reduce_exact

R = dist.ReduceOp
OPS = {"sum": R.SUM, "avg": R.AVG, "min": R.MIN, "max": R.MAX, "prod": R.PRODUCT}
REDUCIBLE = FLOATS + INTS[:4] + (torch.int16, torch.bool, torch.complex64, torch.complex128)
# What the dtypes kolo has no type for reduce with (kolo.torch's stand-ins).
STAND_IN_OPS = {torch.int16: ("sum", "min", "max", "prod"), torch.bool: ("min", "max"),
                torch.complex64: ("sum", "avg"), torch.complex128: ("sum", "avg")}
COPIED = REDUCIBLE + (torch.uint8,)
SIZES = ((0,), (1,), (37,), (5, 3))


def poisoned(shape, dtype):
    """An output filled with values no result should have."""
    return rank_input(dtype, shape, ("poison", str(dtype)), 999)


def size_of(case):
    g = generator(case, "size")
    return SIZES[int(torch.randint(0, len(SIZES), (1,), generator=g))]


def transposed(t):
    """t's values in a tensor that is not contiguous (2-D ones)."""
    return t.t().contiguous().t() if t.dim() == 2 and t.shape[0] > 1 and t.shape[1] > 1 else t.clone()


def check_all_reduce(c, n, me):
    for dtype in REDUCIBLE:
        for name, op in OPS.items():
            case = ("all_reduce", str(dtype), name)
            shape = size_of(case)
            xs = [rank_input(dtype, shape, case, r) for r in range(n)]
            what = "all_reduce %s %s %s" % (dtype, name, shape)
            if dtype in STAND_IN_OPS and name not in STAND_IN_OPS[dtype]:
                try:
                    dist.all_reduce(xs[me].clone(), op=op)
                    c.true(False, what + " is refused")
                except (TypeError, RuntimeError) as e:
                    c.true("kolo has no type for" in str(e) or "complex" in str(e), what + " refused in words", str(e))
                continue
            expected, tol = reduce_exact(xs, name, dtype)
            t = transposed(xs[me])
            c.true(dist.all_reduce(t, op=op) is None, what + ": returns None")
            c.close(t, expected, tol, what + " (in place, not contiguous)")
            t = xs[me].clone()
            work = dist.all_reduce(t, op=op, async_op=True)
            c.true(work.wait() is True and work.is_completed(), what + ": async Work done")
            value = work.get_future().value()  # complex: the real view torch gave the backend
            c.true(len(value) == 1 and value[0].data_ptr() == t.data_ptr(), what + ": the future has the tensor")
            c.close(t, expected, tol, what + " (async)")


def check_async_order(c, n, me):
    """Host all-reduces run while the caller goes on: the group's next calls
    see their results.  Several 1 MiB all-reduces in flight, then a
    broadcast of one of them, a send/recv of another and an all_gather."""
    case = ("async order",)
    xs = [[rank_input(torch.int64, (1 << 17,), case + (i,), r) for r in range(n)] for i in range(3)]
    expected = [reduce_exact(x, "sum", torch.int64) for x in xs]
    mine = [x[me].clone() for x in xs]
    works = [dist.all_reduce(t, async_op=True) for t in mine]
    dist.broadcast(mine[0], src=n - 1)
    c.close(mine[0], *expected[0], "broadcast after an async all_reduce of the same tensor")
    if n > 1:
        peer_out = poisoned(mine[1].shape, torch.int64)
        ops = [dist.P2POp(dist.isend, mine[1], (me + 1) % n), dist.P2POp(dist.irecv, peer_out, (me - 1) % n)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        c.close(peer_out, *expected[1], "send/recv after an async all_reduce of the sent tensor")
    gathered = [poisoned(mine[2].shape, torch.int64) for _ in range(n)]
    dist.all_gather(gathered, mine[2])
    for r, g in enumerate(gathered):
        c.close(g, *expected[2], "all_gather after an async all_reduce, block %d" % r)
    c.true(all(w.wait() and w.is_completed() for w in works), "the async all-reduces' Works complete")


def check_async_goes_on(c, n, me):
    """A host all_reduce returns before it is complete: rank 1 joins it only
    once rank 0 has seen its Work pending (told over a second group)."""
    if n < 2:
        return
    side = dist.new_group([0, 1])
    dist.all_reduce(torch.zeros(1))  # the group's twin communicator exists on every rank
    t, token = torch.full((5,), float(me + 1)), torch.zeros(1)
    work = None
    if me == 0:
        work = dist.all_reduce(t, async_op=True)
        c.true(not work.is_completed(), "an async host all_reduce returns before rank 1 joined it")
        dist.send(token, 1, group=side)
    elif me == 1:
        dist.recv(token, 0, group=side)
    if me != 0:
        work = dist.all_reduce(t, async_op=True)
    c.true(work.wait() and work.is_completed(), "the pending all_reduce completes")
    c.close(t, torch.full((5,), n * (n + 1) / 2), 0, "the pending all_reduce's result")


def check_coalesced_and_reduce(c, n, me):
    for dtype in (torch.float32, torch.int32):  # one dtype per call (torch's rule)
        xs = [[rank_input(dtype, s, ("coalesced", str(dtype), i), r) for r in range(n)]
              for i, s in enumerate(((3,), (0,), (4, 5)))]
        mine = [x[me].clone() for x in xs]
        dist.all_reduce_coalesced(mine, op=R.MAX)
        for i, (x, t) in enumerate(zip(xs, mine)):
            c.close(t, *reduce_exact(x, "max", dtype), "all_reduce_coalesced max %s, tensor %d" % (dtype, i))
    for k, dtype in enumerate((torch.float32, torch.int64, torch.bfloat16, torch.int16, torch.complex64)):
        for name in ("sum", "min") if not dtype.is_complex else ("sum",):
            root, case = (k + len(name)) % n, ("reduce", str(dtype), name)
            shape = size_of(case)
            xs = [rank_input(dtype, shape, case, r) for r in range(n)]
            t = transposed(xs[me])
            dist.reduce(t, root, op=OPS[name])
            if me == root:
                c.close(t, *reduce_exact(xs, name, dtype), "reduce %s %s to %d %s" % (dtype, name, root, shape))


def blocks_of(n, case):
    """Uneven block sizes, one per rank, 0 and odd among them."""
    return [(2 * i + int(torch.randint(0, 3, (1,), generator=generator(case, i)))) % 7 for i in range(n)]


def check_reduce_scatter(c, n, me):
    for dtype in (torch.float32, torch.float16, torch.int8, torch.int64, torch.int16, torch.bool, torch.complex128):
        name = "max" if dtype == torch.bool else "sum"
        case = ("reduce_scatter", str(dtype))
        sizes = blocks_of(n, case)
        xs = [rank_input(dtype, (sum(sizes),), case, r) for r in range(n)]
        expected, tol = reduce_exact([x.split(sizes)[me] for x in xs], name, dtype)
        out = poisoned((sizes[me],), dtype)
        dist.reduce_scatter(out, list(xs[me].split(sizes)), op=OPS[name])
        c.close(out, expected, tol, "reduce_scatter %s %s, blocks %s" % (dtype, name, sizes))
        # equal blocks, one tensor: reduce_scatter_tensor
        for each in (0, 5):
            xs = [rank_input(dtype, (n * each,), case + (each,), r) for r in range(n)]
            out = poisoned((each,), dtype)
            dist.reduce_scatter_tensor(out, xs[me].clone(), op=OPS[name])
            c.close(out, *reduce_exact([x.split(each)[me] if each else x for x in xs], name, dtype),
                    "reduce_scatter_tensor %s %s, %d each" % (dtype, name, each))


def check_copies(c, n, me):
    for k, dtype in enumerate(COPIED):
        case = ("copies", str(dtype))
        shape = size_of(case)
        xs = [rank_input(dtype, shape, case, r) for r in range(n)]
        what = "%s %s" % (dtype, shape)
        root = k % n
        t = transposed(xs[me]) if me != root else xs[me].clone()
        dist.broadcast(t, root)
        c.equal(t, xs[root], "broadcast from %d %s" % (root, what))
        outs = [poisoned(shape, dtype) for _ in range(n)]
        dist.all_gather(outs, xs[me])
        for r in range(n):
            c.equal(outs[r], xs[r], "all_gather %s, rank %d's" % (what, r))
        out = poisoned((n,) + shape, dtype)
        dist.all_gather_into_tensor(out, xs[me])
        c.equal(out, torch.stack(xs), "all_gather_into_tensor " + what)
        # uneven: rank r gives blocks_of(n)[r] elements
        sizes = blocks_of(n, case)
        ys = [rank_input(dtype, (sizes[r],), case + ("uneven",), r) for r in range(n)]
        outs = [poisoned((s,), dtype) for s in sizes]
        dist.all_gather(outs, ys[me])
        for r in range(n):
            c.equal(outs[r], ys[r], "all_gather, uneven sizes %s, %s, rank %d's" % (sizes, dtype, r))
        # gather, scatter: equal sizes
        root = (k + 1) % n
        outs = [poisoned(shape, dtype) for _ in range(n)] if me == root else None
        dist.gather(xs[me], outs, dst=root)
        if me == root:
            for r in range(n):
                c.equal(outs[r], xs[r], "gather to %d %s, rank %d's" % (root, what, r))
        parts = [rank_input(dtype, shape, case + ("scatter", r), root) for r in range(n)]
        out = poisoned(shape, dtype)
        dist.scatter(out, parts if me == root else None, src=root)
        c.equal(out, parts[me], "scatter from %d %s" % (root, what))
        check_all_to_all(c, n, me, dtype, case)


def check_all_to_all(c, n, me, dtype, case):
    # rank s sends f(s, d) rows to rank d (some 0, some odd)
    def f(s, d):
        return (s + 2 * d + len(str(dtype))) % 4

    def block(s, d, width):
        return rank_input(dtype, (f(s, d), width), case + ("a2a", d, width), s)

    ins = [block(me, d, 1).reshape(-1) for d in range(n)]
    outs = [poisoned((f(s, me),), dtype) for s in range(n)]
    dist.all_to_all(outs, ins)
    for s in range(n):
        c.equal(outs[s], block(s, me, 1).reshape(-1), "all_to_all %s, uneven, from rank %d" % (dtype, s))
    inp = torch.cat([block(me, d, 3) for d in range(n)])
    out = poisoned((sum(f(s, me) for s in range(n)), 3), dtype)
    dist.all_to_all_single(out, inp, [f(s, me) for s in range(n)], [f(me, d) for d in range(n)])
    c.equal(out, torch.cat([block(s, me, 3) for s in range(n)]), "all_to_all_single %s with splits" % dtype)
    inp = torch.cat([rank_input(dtype, (2, 3), case + ("a2a even", d), me) for d in range(n)])
    out = poisoned((2 * n, 3), dtype)
    dist.all_to_all_single(out, inp)
    c.equal(out, torch.cat([rank_input(dtype, (2, 3), case + ("a2a even", me), s) for s in range(n)]),
            "all_to_all_single %s, equal splits" % dtype)


def check_send_recv(c, n, me):
    if n == 1:
        return
    nxt, prv = (me + 1) % n, (me - 1) % n
    for dtype in (torch.float32, torch.int16, torch.bool, torch.complex64):
        case = ("p2p", str(dtype))
        size = 1 + 2 * 5000 * (dtype == torch.float32)  # beyond kolo's buffers once: every rank sends first
        mine = rank_input(dtype, (size,), case, me)
        got = poisoned((size,), dtype)
        works = [dist.isend(mine, nxt, tag=3), dist.irecv(got, prv, tag=3)]
        for w in works:
            w.wait()
        c.equal(got, rank_input(dtype, (size,), case, prv), "isend / irecv in a ring, %s %d" % (dtype, size))
        got = poisoned((size, 2), dtype).t()  # not contiguous
        ops = [dist.P2POp(dist.isend, rank_input(dtype, (2, size), case + ("batch",), me), nxt),
               dist.P2POp(dist.irecv, got, prv)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        c.equal(got, rank_input(dtype, (2, size), case + ("batch",), prv), "batch_isend_irecv, %s" % dtype)
    # blocking pairs: 0 -> 1 -> 0
    if me < 2:
        t = rank_input(torch.float64, (7,), ("pair",), me)
        if me == 0:
            dist.send(t, 1)
            got = poisoned((7,), torch.float64)
            c.true(dist.recv(got, 1) == 1, "recv returns the sender's rank")
            c.equal(got, rank_input(torch.float64, (7,), ("pair",), 1), "send, then recv its answer")
        else:
            got = poisoned((7,), torch.float64)
            dist.recv(got, 0)
            dist.send(t, 0)
            c.equal(got, rank_input(torch.float64, (7,), ("pair",), 0), "recv, then send an answer")


def check_groups_and_objects(c, n, me):
    members = list(range(n - 1)) if n > 1 else [0]
    group = dist.new_group(members)
    if me in members:
        m, gme = len(members), members.index(me)
        c.true(dist.get_world_size(group) == m and dist.get_rank(group) == gme, "new_group: size and rank")
        xs = [rank_input(torch.float32, (9,), ("group",), r) for r in members]
        t = xs[gme].clone()
        dist.all_reduce(t, group=group)
        c.close(t, *reduce_exact(xs, "sum", torch.float32), "all_reduce in new_group(%s)" % members)
        outs = [poisoned((9,), torch.float32) for _ in members]
        dist.all_gather(outs, xs[gme], group=group)
        c.true(all(torch.equal(o, x) for o, x in zip(outs, xs)), "all_gather in new_group(%s)" % members)
        objs = [None] * m
        dist.all_gather_object(objs, {"rank": me, "in": "group"}, group=group)
        c.true(objs == [{"rank": r, "in": "group"} for r in members], "all_gather_object in new_group", str(objs))
    else:
        c.true(group == dist.GroupMember.NON_GROUP_MEMBER, "not a member of new_group(%s)" % members)
    objs = [None] * n
    dist.all_gather_object(objs, ("rank", me, list(range(me))))
    c.true(objs == [("rank", r, list(range(r))) for r in range(n)], "all_gather_object", str(objs))
    lst = [{"from": n - 1}, "x" * 1000, 3.5] if me == n - 1 else [None, None, None]
    dist.broadcast_object_list(lst, src=n - 1)
    c.true(lst == [{"from": n - 1}, "x" * 1000, 3.5], "broadcast_object_list", str(lst)[:80])
    got = [None] * n if me == 0 else None
    dist.gather_object({"r": me}, got, dst=0)
    c.true(me != 0 or got == [{"r": r} for r in range(n)], "gather_object", str(got))
    out = [None]
    dist.scatter_object_list(out, [["to", r] for r in range(n)] if me == 0 else None, src=0)
    c.true(out == [["to", me]], "scatter_object_list", str(out))
    c.true(dist.barrier() is None, "barrier")
    work = dist.barrier(async_op=True)
    c.true(work.wait() and work.is_completed(), "barrier, async")


def check_refusals(c, n, me):
    t = torch.ones(3, dtype=torch.int32)
    for op in ("BAND", "BOR", "BXOR"):
        try:
            dist.all_reduce(t, op=getattr(R, op))
            c.true(False, "all_reduce %s is refused" % op)
        except RuntimeError as e:
            c.true("ReduceOp.%s" % op in str(e) and "kolo has no bitwise reductions" in str(e),
                   "all_reduce %s refused in words" % op, str(e))
    if hasattr(dist, "_make_nccl_premul_sum"):
        try:
            dist.all_reduce(torch.ones(2), op=dist._make_nccl_premul_sum(2.0))
            c.true(False, "all_reduce PREMUL_SUM is refused")
        except RuntimeError as e:
            c.true("PREMUL_SUM" in str(e) and "use SUM" in str(e), "all_reduce PREMUL_SUM refused in words", str(e))
    if n > 1:
        try:
            dist.recv(t)
            c.true(False, "recv from any source is refused")
        except RuntimeError as e:
            c.true("any source" in str(e), "recv from any source refused in words", str(e))
    try:  # refused on every rank, before kolo is called
        dist.all_gather_into_tensor(torch.ones(n + 1), torch.ones(1))
        c.true(False, "all_gather_into_tensor into a wrong size is refused")
    except ValueError as e:
        c.true("is not %d ranks x the input" % n in str(e), "all_gather_into_tensor into a wrong size refused in "
               "words", str(e))


def check_failure(c, n, me):
    """A kolo failure reaches wait(): in a group of ranks 0 and 1 with a 1 s
    timeout, rank 0 reduces alone; kolo's timeout sentence is raised."""
    if n < 2:
        return
    group = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=1))
    if me == 0:
        work = dist.all_reduce(torch.ones(4), group=group, async_op=True)
        try:
            work.wait()
            c.true(False, "an all_reduce that rank 1 never joins fails")
        except RuntimeError as e:
            c.true("kolo backend: all_reduce" in str(e) and "rank 1" in str(e).lower().replace("peer", "rank"),
                   "its wait() raises kolo's sentence", str(e))
        c.true(work.is_completed() and work.exception() is not None, "the failed Work is completed, with its error")
    dist.barrier()


def main():
    rank = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    size = int(os.environ.get("WORLD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("kolo", rank=rank, world_size=size)
    n, me = dist.get_world_size(), dist.get_rank()
    c = Checks(me)
    c.true(dist.get_backend() == "kolo" and (n, me) == (size, rank), "init_process_group(backend=\"kolo\")")
    parts = [check_all_reduce, check_async_order, check_async_goes_on, check_coalesced_and_reduce,
             check_reduce_scatter, check_copies, check_send_recv, check_groups_and_objects, check_refusals,
             check_failure]
    only = sys.argv[1:]
    for part in parts:
        if not only or part.__name__ in only:
            part(c, n, me)
    dist.destroy_process_group()
    return c.summary()


if __name__ == "__main__":
    sys.exit(main())
