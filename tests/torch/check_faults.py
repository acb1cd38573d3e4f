"""Failures in training, which must fail every rank with a named error,
never hang:

  --case mismatch  rank 1's backward skips a layer at step 2 (its gradients
                   are never marked): every rank's step() raises KoloError
                   with kolo's phrase "calls do not match"
  --case kill      rank 2 SIGKILLs itself at step 2: every other rank raises
                   KoloError naming rank 2, within --bound seconds

Each surviving rank exits 0 when it saw what it must see (launch.py lets a
killed rank be killed: --killed 2)."""
import argparse
import os
import signal
import sys
import time

import torch

import kolo.torch as kt
from models import batch


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.branch, self.head = torch.nn.Linear(16, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 4)

    def forward(self, x, skip_branch=False):
        h = torch.tanh(self.body(x))
        return self.head(h if skip_branch else h + torch.tanh(self.branch(h)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=("mismatch", "kill"), required=True)
    ap.add_argument("--bound", type=float, default=20.0)
    args = ap.parse_args()
    kt.init()
    me = kt.rank()
    torch.manual_seed(1)
    model = Branchy()
    opt = kt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01), named_parameters=model.named_parameters())
    t0 = None
    try:
        for step in range(6):
            x, y = batch("mlp", step, 0, me)
            if step == 2:
                t0 = time.monotonic()
                if args.case == "kill" and me == 2:
                    os.kill(os.getpid(), signal.SIGKILL)
            opt.zero_grad()
            skip = args.case == "mismatch" and me == 1 and step == 2
            torch.nn.functional.mse_loss(model(x, skip_branch=skip), y).backward()
            opt.step()
            kt.allgather(torch.tensor([step]))
    except kt.KoloError as e:
        took = time.monotonic() - (t0 or time.monotonic())
        words = "calls do not match" if args.case == "mismatch" else "rank 2"
        ok = words in str(e) and took < args.bound and step == 2
        print("rank %d: %s at step %d after %.2f s: %s" % (me, "expected failure" if ok else "FAIL", step, took, e),
              flush=True)
        kt.shutdown()
        return 0 if ok else 1
    print("rank %d: FAIL: training went on through the %s" % (me, args.case), flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
