"""kolo.torch.elastic, under python -m kolo.torch.elastic.launch:

  --case kill         3 workers train an MLP with DistributedOptimizer (SGD
                      with momentum) under @elastic.run, committing every
                      step; worker 1 SIGKILLs itself at a seeded step; the 2
                      survivors restore the last commit, reset (ranks 0, 1)
                      and finish
  --case add          2 workers train; at step --join-at they wait (calling
                      check_host_updates) until a third worker, started
                      later by the launcher (--add-after), has joined; the
                      3 finish
  --case unreachable  kt.init() with a store nobody runs fails within --bound s

Every time the training function starts (after sync()) every rank's
parameters must be identical; at the end they must be identical and within
1e-5 of one process replaying, with plain torch, what the job did: each
step on the union of the batches of as many ranks as the job had then
(3 then 2; 2 then 3).  The step counter must end at --steps with one size
recorded per step, and the reset callback must have run once on the
workers that were there before the reset (never on the added one).

Process sets (check_sets, at every start of the training function): kill
adds {0, 2} and {0, 1} before training: after worker 1 died, the first is
carried over as ranks [0, 1] (the same object and id) and the second is
dropped, a call with it refused in words; add adds {0, 1} on the first 2
workers: after the third joined every rank has it (the added worker from
kt.init(), in none of it), and the 3 add {1, 2}, which gets the same id
everywhere.  Each live set's allreduce (int64, Sum) must equal the exact
sum over its ranks; in kill, a DistributedOptimizer on {0, 2}, made again
at the reset, must average over the set's current ranks exactly.
"""
import argparse
import os
import random
import signal
import sys
import time

import torch

import kolo.torch as kt
from kolo.torch import _process_sets
from kolo.torch.elastic import _rendezvous
from models import batch, mlp, union


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def same_everywhere(model, what):
    every = kt.allgather(flat(model).unsqueeze(0))
    if not all(torch.equal(every[0], row) for row in every):
        raise SystemExit("FAIL: parameters differ between ranks %s: %s" % (what, every.sum(1).tolist()))


def reference(sizes, lr):
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for step, n in enumerate(sizes):
        x, y = union("mlp", step, 0, n)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return flat(model)


def made_sets(args, me):
    """[(set, the worker ids it was made of)]: added here before training,
    or (a worker added later) the sets kt.init() carried over to it."""
    if args.case == "kill":
        return [(kt.add_process_set(ranks), ranks) for ranks in ([0, 2], [0, 1])]
    if me < 2:
        return [(kt.add_process_set([0, 1]), [0, 1])]
    members = _rendezvous.members()
    return [(ps, [members[r] for r in ps.ranks]) for ps in _process_sets.added()[0]]


def check_sets(made, starts):
    """Every set still whole is on its workers' current ranks and sums
    exactly; a set that lost a worker is refused in words."""
    members = _rendezvous.members()
    for ps, workers in made:
        if not all(w in members for w in workers):
            try:
                kt.allreduce(torch.ones(2), process_set=ps)
                raise SystemExit("FAIL: a call on %r, which lost a worker, ran" % ps)
            except ValueError as e:
                if "dropped" not in str(e) or "left the job" not in str(e):
                    raise SystemExit("FAIL: a call on a dropped set said: %s" % e)
            continue
        ranks = sorted(members.index(w) for w in workers)
        if ps.ranks != ranks or ps.process_set_id is None:
            raise SystemExit("FAIL: %r at start %d, not of ranks %s" % (ps, len(starts), ranks))
        if ps.included():
            x = torch.arange(1, 6, dtype=torch.int64) * (kt.rank() + 1)
            want = torch.arange(1, 6, dtype=torch.int64) * sum(r + 1 for r in ranks)
            got = kt.allreduce(x, op=kt.Sum, process_set=ps)
            if not torch.equal(got, want):
                raise SystemExit("FAIL: allreduce on %r: %s, not %s" % (ps, got.tolist(), want.tolist()))


def set_optimizer(ps):
    """A DistributedOptimizer on ps (made before any reset), or None off it."""
    if not ps.included():
        return None
    lin = torch.nn.Linear(3, 1).double()
    return kt.DistributedOptimizer(torch.optim.SGD(lin.parameters(), lr=1.0), named_parameters=lin.named_parameters(),
                                   process_set=ps)


def check_set_step(opt, ps):
    """One step of opt: every gradient is this rank + 1, so each parameter
    moves by minus the mean of (rank + 1) over the set's current ranks."""
    params = [p for g in opt.param_groups for p in g["params"]]
    before = [p.detach().clone() for p in params]
    opt.zero_grad()
    sum((p * (kt.rank() + 1)).sum() for p in params).backward()
    opt.step()
    mean = sum(r + 1 for r in ps.ranks) / len(ps.ranks)
    if not all(torch.equal(p.detach(), b - mean) for p, b in zip(params, before)):
        raise SystemExit("FAIL: a DistributedOptimizer on %r did not average over its ranks" % ps)


def train_job(args):
    kt.init()
    me = int(os.environ["KOLO_ELASTIC_ID"])
    made = made_sets(args, me)
    set_opt = set_optimizer(made[0][0]) if args.case == "kill" else None  # made again at the reset
    torch.manual_seed(0 if me == 0 else 100 + me)  # sync() must give every worker worker 0's model
    model = mlp()
    opt = kt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9),
                                  named_parameters=model.named_parameters())
    state = kt.elastic.TorchState(model=model, optimizer=opt, step=0, sizes=[])
    resets = []
    state.register_reset_callbacks([lambda: resets.append(kt.size())])
    kill_at = random.Random(args.seed).randrange(2, args.steps - 2)
    starts = []

    @kt.elastic.run
    def train(state):
        starts.append(state.step)
        same_everywhere(state.model, "after sync() at step %d" % state.step)
        if args.case == "add" and kt.size() == 3 and len(made) == 1:  # every rank, after the reset
            made.append((kt.add_process_set([1, 2]), _rendezvous.members()[1:]))
            if made[1][0].process_set_id != 2:
                raise SystemExit("FAIL: the set added after the reset has id %s" % made[1][0].process_set_id)
        check_sets(made, starts)
        if set_opt is not None:
            check_set_step(set_opt, made[0][0])
        deadline = time.monotonic() + 60
        while state.step < args.steps:
            if args.case == "add" and state.step == args.join_at and kt.size() < 3:
                if time.monotonic() > deadline:
                    raise SystemExit("FAIL: no worker joined within 60 s")
                time.sleep(0.05)
                state.check_host_updates()
                continue
            if args.case == "kill" and me == 1 and state.step == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            x, y = batch("mlp", state.step, 0, kt.rank())
            state.optimizer.zero_grad()
            torch.nn.functional.mse_loss(state.model(x), y).backward()
            state.optimizer.step()
            state.sizes.append(kt.size())
            state.step += 1
            state.commit()

    train(state)
    same_everywhere(model, "at the end")
    if args.case == "kill":
        want_sizes, want_resets = [3] * kill_at + [2] * (args.steps - kill_at), [2]
    else:
        want_sizes = [2] * args.join_at + [3] * (args.steps - args.join_at)
        want_resets = [3] if me < 2 else []
    err = (flat(model) - reference(state.sizes, args.lr)).abs().max().item()
    ok = state.step == args.steps and state.sizes == want_sizes and resets == want_resets and err < 1e-5
    print("worker %d (rank %d of %d): %s: step %d, sizes %s, resets %s, starts %s, max error %.2e"
          % (me, kt.rank(), kt.size(), "ok" if ok else "FAIL", state.step, state.sizes, resets, starts, err),
          flush=True)
    kt.shutdown()
    return 0 if ok else 1


def unreachable(args):
    from launch import free_port_pair

    os.environ.update(KOLO_ELASTIC_STORE="127.0.0.1:%d" % free_port_pair(), KOLO_ELASTIC_ID="0")
    t0 = time.monotonic()
    try:
        kt.init(timeout_ms=2000)
    except RuntimeError as e:
        took = time.monotonic() - t0
        ok = took < args.bound and "rendezvous store" in str(e)
        print("%s after %.1f s: %s" % ("expected failure" if ok else "FAIL", took, e), flush=True)
        return 0 if ok else 1
    print("FAIL: kt.init() joined a store nobody runs", flush=True)
    return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=("kill", "add", "unreachable"), required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--join-at", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--bound", type=float, default=10.0)
    args = ap.parse_args()
    return unreachable(args) if args.case == "unreachable" else train_job(args)


if __name__ == "__main__":
    sys.exit(main())
