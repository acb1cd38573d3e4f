"""KOLO_TIMELINE on a training run shows gradients reduced while backward
is still running.  The model's backward sleeps --sleep-ms between its
layers (a stand-in for compute; each Linear(512, 512) is about a bucket),
so in every step after the first some bucket's all-reduce must be done
("done" event) before the last gradient of that step is ready ("ready").
Each rank reads its own timeline file after shutdown closed it."""
import argparse
import json
import os
import sys
import time

import torch

import kolo.torch as kt
from reference import Checks


class SlowBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, seconds):
        ctx.seconds = seconds
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.seconds)
        return grad, None


class Slow(torch.nn.Module):
    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def forward(self, x):
        return SlowBackward.apply(x, self.seconds)


def bucket_spans(events):
    """(step, launch ts, done ts) per all-reduce: B and E events pair per tid."""
    open_by_tid, spans = {}, []
    for e in events:
        if e.get("name") == "launch":
            open_by_tid[e["tid"]] = e
        elif e.get("name") == "done" and e["tid"] in open_by_tid:
            b = open_by_tid.pop(e["tid"])
            spans.append((b["args"]["step"], b["ts"], e["ts"]))
    return spans


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--sleep-ms", type=float, default=30)
    args = ap.parse_args()
    pattern = os.environ["KOLO_TIMELINE"]
    kt.init()
    me = kt.rank()
    c = Checks(me)
    torch.manual_seed(0)
    s = args.sleep_ms / 1000
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), Slow(s), torch.nn.Linear(512, 512), Slow(s),
                                torch.nn.Linear(512, 512), Slow(s), torch.nn.Linear(512, 8))
    opt = kt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01), named_parameters=model.named_parameters())
    for step in range(args.steps):
        opt.zero_grad()
        x = torch.randn(8, 512, generator=torch.Generator().manual_seed(step * 10 + me))
        model(x).square().mean().backward()
        opt.step()
    kt.shutdown()  # closes the timeline
    with open(pattern.replace("%r", str(me)), encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    spans = bucket_spans(events)
    c.true(len({sp[0] for sp in spans}) == args.steps, "a launch/done pair for each step", str(spans[:3]))
    for step in range(2, args.steps + 1):  # the fusion's steps count from 1; the first may rebuild
        last_ready = max(e["ts"] for e in events if e.get("name") == "ready" and e["args"]["step"] == step)
        done = sorted(sp[2] for sp in spans if sp[0] == step)
        c.true(done and done[0] < last_ready, "step %d: a bucket reduced while backward ran" % step,
               "first done %s, last gradient ready %.0f us" % (done[:1], last_ready))
        if done:
            print("rank %d: step %d: first bucket done %.1f ms before the last gradient was ready (%d buckets)" %
                  (me, step, (last_ready - done[0]) / 1000, len(done)), flush=True)
    return c.summary()


if __name__ == "__main__":
    sys.exit(main())
