"""Every call of kolo.torch's collectives on random tensors of every dtype,
checked element by element against the exact result that each rank
computes itself from every rank's input (reference.py).  Run on N ranks
(mpirun, or launch.py); prints "rank r: N checks, M failed"."""
import sys

import torch

import kolo.torch as kt
from reference import FLOATS, INTS, Checks, generator, rank_input, reduce_exact

OPS = {"sum": kt.Sum, "avg": kt.Average, "min": kt.Min, "max": kt.Max, "prod": kt.Product}
NATIVE = FLOATS + INTS[:4]
ALL_TYPES = NATIVE + (torch.int16, torch.bool, torch.complex64, torch.complex128)
# The stand-ins of _dtypes.py: what each dtype kolo has no type for reduces with.
STAND_IN_OPS = {torch.int16: ("sum", "min", "max", "prod"), torch.bool: ("min", "max"),
                torch.complex64: ("sum", "avg"), torch.complex128: ("sum", "avg")}


def shape_of(case):
    g = generator(case, "shape")
    return (int(torch.randint(1, 60, (1,), generator=g)), int(torch.randint(1, 40, (1,), generator=g)))


def inputs(dtype, case, n):
    shape = shape_of(case)
    return [rank_input(dtype, shape, case, r) for r in range(n)]


def check_reductions(c, n, me):
    for dtype in ALL_TYPES:
        for name, op in OPS.items():
            case = ("reduce", str(dtype), name)
            if dtype in STAND_IN_OPS and name not in STAND_IN_OPS[dtype]:
                try:
                    kt.allreduce(inputs(dtype, case, n)[me], op=op)
                    c.true(False, "allreduce %s %s is refused" % (dtype, name))
                except TypeError as e:
                    c.true("kolo has no type for" in str(e), "allreduce %s %s refused in words" % (dtype, name), str(e))
                continue
            xs = inputs(dtype, case, n)
            expected, tol = reduce_exact(xs, name, dtype)
            what = "%s %s (%s)" % (dtype, name, "x".join(map(str, xs[me].shape)))
            mine = xs[me].clone()
            c.close(kt.allreduce(mine, op=op), expected, tol, "allreduce " + what)
            c.equal(mine, xs[me], "allreduce leaves its input alone: " + what)
            c.close(kt.allreduce_(mine, op=op), expected, tol, "allreduce_ " + what)
            c.close(mine, expected, tol, "allreduce_ in place " + what)
            handle = kt.allreduce_async(xs[me], op=op)
            while not kt.poll(handle):
                pass
            c.close(kt.synchronize(handle), expected, tol, "allreduce_async " + what)
            t = xs[me].t().clone().t() if xs[me].dim() == 2 else xs[me].clone()  # not contiguous
            kt.synchronize(kt.allreduce_async_(t, op=op))
            c.close(t, expected, tol, "allreduce_async_ of a transposed tensor " + what)


def check_grouped(c, n, me):
    types = (torch.float32, torch.int8, torch.bfloat16, torch.int16)
    xs = [inputs(d, ("grouped", str(d)), n) for d in types]
    refs = [reduce_exact(x, "max", d) for x, d in zip(xs, types)]
    outs = kt.grouped_allreduce([x[me] for x in xs], op=kt.Max)
    for d, out, (e, tol) in zip(types, outs, refs):
        c.close(out, e, tol, "grouped_allreduce max %s" % d)
    mine = [x[me].clone() for x in xs]
    kt.synchronize(kt.grouped_allreduce_async_(mine, op=kt.Max))
    for d, out, (e, tol) in zip(types, mine, refs):
        c.close(out, e, tol, "grouped_allreduce_async_ max %s" % d)


def check_copies(c, n, me):
    for dtype in ALL_TYPES:
        case = ("copy", str(dtype))
        cols = shape_of(case)[1]
        # allgather: rank r gives r + 1 rows (then every rank 3)
        xs = [rank_input(dtype, (r + 1, cols), case, r) for r in range(n)]
        c.equal(kt.allgather(xs[me]), torch.cat(xs), "allgather, uneven rows, %s" % dtype)
        ys = [rank_input(dtype, (3, cols), case + ("even",), r) for r in range(n)]
        c.equal(kt.synchronize(kt.allgather_async(ys[me])), torch.cat(ys), "allgather_async %s" % dtype)
        for root in range(n):
            c.equal(kt.broadcast(xs[me][:1], root), xs[root][:1], "broadcast root %d %s" % (root, dtype))
            mine = xs[root][:1].clone() if me == root else torch.full_like(xs[root][:1], 1, dtype=dtype)
            kt.broadcast_(mine, root)  # the non-roots' tensors were poisoned
            c.equal(mine, xs[root][:1], "broadcast_ root %d %s" % (root, dtype))
            mine = torch.zeros_like(xs[root][:1]) if me != root else xs[root][:1].clone()
            c.equal(kt.synchronize(kt.broadcast_async_(mine, root)), xs[root][:1], "broadcast_async_ %s" % dtype)
        # alltoall: even blocks of 2 rows, then rank i sends (i + j) % 3 rows to rank j
        zs = [rank_input(dtype, (2 * n, cols), case + ("a2a",), r) for r in range(n)]
        expect = torch.cat([zs[i][2 * me:2 * me + 2] for i in range(n)])
        c.equal(kt.alltoall(zs[me]), expect, "alltoall %s" % dtype)
        splits = [[(i + j) % 3 for j in range(n)] for i in range(n)]
        ws = [rank_input(dtype, (sum(splits[i]), cols), case + ("uneven",), i) for i in range(n)]
        pieces = []
        for i in range(n):
            start = sum(splits[i][:me])
            pieces.append(ws[i][start:start + splits[i][me]])
        out, received = kt.synchronize(kt.alltoall_async(ws[me], splits=splits[me]))
        c.equal(out, torch.cat(pieces), "alltoall with splits %s" % dtype)
        c.true(received.tolist() == [splits[i][me] for i in range(n)], "alltoall received splits %s" % dtype,
               str(received.tolist()))


def check_state(c, n, me):
    torch.manual_seed(100 + me)  # every rank starts elsewhere
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.BatchNorm1d(7))
    torch.manual_seed(100)  # rank 0's start, made here too
    root_model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.BatchNorm1d(7))
    kt.broadcast_parameters(model.state_dict(), root_rank=0)
    for (name, got), (_, want) in zip(model.state_dict().items(), root_model.state_dict().items()):
        c.equal(got, want, "broadcast_parameters: " + name)
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (me + 1))
    for step in range(me + 1):  # a different state on every rank
        model(torch.randn(4, 5, generator=generator("opt", me, step))).sum().backward()
        opt.step()
    root_state = opt.state_dict() if me == n - 1 else None
    kt.broadcast_optimizer_state(opt, root_rank=n - 1)
    got = opt.state_dict()
    expect_step = n  # rank n - 1 made n steps
    c.true(all(int(s["step"]) == expect_step for s in got["state"].values()), "broadcast_optimizer_state: step")
    c.true(abs(got["param_groups"][0]["lr"] - 0.01 * n) < 1e-12, "broadcast_optimizer_state: lr")
    if root_state is not None:
        for k, s in root_state["state"].items():
            c.equal(got["state"][k]["exp_avg"], s["exp_avg"], "root keeps its state")
    digest = kt.allgather(torch.cat([s["exp_avg_sq"].reshape(-1) for s in got["state"].values()]).unsqueeze(0))
    c.true(bool((digest == digest[0]).all()), "broadcast_optimizer_state: every rank holds the root's moments")
    obj = kt.broadcast_object({"rank": me, "list": list(range(me + 3))}, root_rank=0)
    c.true(obj == {"rank": 0, "list": [0, 1, 2]}, "broadcast_object", str(obj))


class _FakeCuda:
    """A tensor-like on cuda:0, for the refusal of mixed memory kinds (this
    machine has no GPU, so no real CUDA tensor can be made)."""
    device = torch.device("cuda", 0)


def check_refusals(c, n, me):
    from kolo.torch._placement import memory_kind

    for call in (lambda: memory_kind([torch.zeros(1), _FakeCuda()], "kolo.torch.grouped_allreduce"),
                 lambda: kt.grouped_allreduce([torch.zeros(1), torch.zeros(1, device="meta")])):
        try:
            call()
            c.true(False, "mixed memory kinds are refused")
        except ValueError as e:
            c.true("host and CUDA memory in one call" in str(e) or "host and CUDA memory only" in str(e),
                   "mixed memory kinds refused in words", str(e))
    bad_calls = [(lambda: kt.broadcast(torch.zeros(1), n), "not a rank"),
                 (lambda: kt.allreduce(torch.zeros(1), op=99), "none of kolo.torch's")]
    if n > 1:
        bad_calls.append((lambda: kt.alltoall(torch.zeros(n + 1)), "does not divide"))
    for bad, words in bad_calls:
        try:
            bad()
            c.true(False, "refused: " + words)
        except ValueError as e:
            c.true(words in str(e), "refused in words: " + words, str(e))


def main():
    kt.init()
    n, me = kt.size(), kt.rank()
    c = Checks(me)
    c.true(kt.local_size() == n and kt.local_rank() == me, "local_rank / local_size on one host",
           "%d / %d" % (kt.local_rank(), kt.local_size()))
    for part in (check_reductions, check_grouped, check_copies, check_state, check_refusals):
        part(c, n, me)
    kt.shutdown()
    return c.summary()


if __name__ == "__main__":
    sys.exit(main())
