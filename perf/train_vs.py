"""train_vs.py - one data-parallel training run, timed, launched by `perf/compare.sh train` under
mpirun (one method per launch, so that libraries never share a process; docs/benchmarking.md says
what the methods and models are).  Rank 0 prints "train_vs <method> <model> <ranks> <median step
ms>" (the slowest rank's median) and, with --allreduce, "train_vs_ar <method> <model> <ranks> <ms>":
one all-reduce of all the gradients by the method's library.  Not a test:
tests/torch/check_training.py checks the results."""
import argparse
import os
import statistics
import sys
import time

import torch


def cnn():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                               torch.nn.Flatten(), torch.nn.Linear(64 * 16 * 16, 400), torch.nn.ReLU(),
                               torch.nn.Linear(400, 10))


class Block(torch.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.na = torch.nn.BatchNorm2d(cout)
        self.b = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.nb = torch.nn.BatchNorm2d(cout)
        self.skip = (torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False), torch.nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else torch.nn.Identity())

    def forward(self, x):
        y = torch.relu(self.na(self.a(x)))
        return torch.relu(self.nb(self.b(y)) + self.skip(x))


def resnet():
    layers = [torch.nn.Conv2d(3, 32, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(32), torch.nn.ReLU()]
    cin = 32
    for cout, stride in ((32, 1), (64, 2), (128, 2), (256, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(256, 10)]
    return torch.nn.Sequential(*layers)


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(512, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096),
                               torch.nn.ReLU(), torch.nn.Linear(4096, 512))


MODELS = {"cnn": cnn, "resnet": resnet, "mlp": mlp}


def data(model, batch, g):
    """(input, target, loss) of one synthetic batch."""
    if model == "mlp":
        return torch.randn(batch, 512, generator=g), torch.randn(batch, 512, generator=g), torch.nn.functional.mse_loss
    return (torch.randn(batch, 3, 32, 32, generator=g), torch.randint(0, 10, (batch,), generator=g),
            torch.nn.functional.cross_entropy)


def world():
    """(rank, size) from mpirun's variables (1 process without them)."""
    return int(os.environ.get("OMPI_COMM_WORLD_RANK", 0)), int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))


def torch_group(backend):
    rank, size = world()
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(size))
    if backend == "kolo":
        import kolo.torch  # noqa: F401 - registers the backend
    torch.distributed.init_process_group(backend)

    def slowest(t):
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        return t
    return slowest


def setup(method, model):
    """(model, optimizer, max over ranks of a 1-element tensor, sum over ranks in place)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if method == "single":
        return model, opt, lambda t: t, lambda t: t
    if method in ("ddp-kolo", "ddp-gloo"):
        mx = torch_group(method[4:])
        model = torch.nn.parallel.DistributedDataParallel(model)
        return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), mx, torch.distributed.all_reduce
    lib = __import__("horovod.torch" if method == "horovod" else "kolo.torch", fromlist=["torch"])
    lib.init()
    opt = lib.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    lib.broadcast_parameters(model.state_dict(), root_rank=0)
    return model, opt, lambda t: lib.allreduce(t, op=lib.Max), lambda t: lib.allreduce_(t, op=lib.Sum)


def step_times(model, opt, batch, steps, frees):
    """Seconds per step.  frees: the gradients are freed between steps (torch 2's default), not
    zeroed (torch 1.13's zero_grad()), which costs a ResNet-style step more than DDP's whole step:
    every method but Horovod, whose zero_grad() takes no argument.  kolo's DistributedOptimizer
    zeroes the gradients that are its buckets' views in place whatever it is told."""
    x, y, loss = batch
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        if frees:
            opt.zero_grad(set_to_none=True)
        else:
            opt.zero_grad()
        loss(model(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def allreduce_ms(allreduce, model, reps=5):
    """The median time of one in-place all-reduce of as many floats as the model has gradients."""
    t = torch.randn(sum(p.numel() for p in model.parameters()))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        allreduce(t)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", required=True, choices=("single", "kolo", "ddp-kolo", "ddp-gloo", "horovod"))
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=12, help="timed steps (after 3 not timed)")
    ap.add_argument("--allreduce", action="store_true", help="time one all-reduce of all the gradients too")
    args = ap.parse_args()
    torch.set_num_threads(1)  # one core per rank, for every method
    torch.manual_seed(0)
    model, opt, slowest, allreduce = setup(args.method, MODELS[args.model]())
    rank, size = world()
    batch = data(args.model, args.batch, torch.Generator().manual_seed(1 + rank))
    frees = args.method != "horovod"
    step_times(model, opt, batch, 3, frees)
    median = statistics.median(step_times(model, opt, batch, args.steps, frees))
    worst = float(slowest(torch.tensor([median], dtype=torch.float64)))
    if rank == 0:
        print("train_vs %s %s %d %.3f" % (args.method, args.model, size, worst * 1e3), flush=True)
    if args.allreduce and args.method != "single":
        ar = float(slowest(torch.tensor([allreduce_ms(allreduce, model)], dtype=torch.float64)))
        if rank == 0:
            print("train_vs_ar %s %s %d %.3f" % (args.method, args.model, size, ar), flush=True)
    if args.method == "ddp-gloo":
        # torch 1.13's Gloo teardown at exit now and then aborts ("terminate
        # called without an active exception") or deadlocks (DDP's reducer
        # joins a Gloo thread that waits for the GIL the joiner holds): the
        # figures are out, so leave without running destructors.
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
