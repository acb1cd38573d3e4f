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
"""
import argparse
import os
import random
import signal
import sys
import time

import torch

import kolo.torch as kt
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


def train_job(args):
    kt.init()
    me = int(os.environ["KOLO_ELASTIC_ID"])
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
