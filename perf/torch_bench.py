"""torch_bench.py - step time of one training loop, data-parallel with
kolo's DistributedOptimizer or with PyTorch DDP on Gloo, alternating in
one run (same processes, same data, same model shape; each method its own
model copy), plus what the time is made of: the compute alone and one
all-reduce of all the gradients by each library.  Not a test.

    perf/run_torch.sh            (2 and 4 processes under mpirun)
    mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29555 python perf/torch_bench.py [--rounds R] [--steps K]

The model is a wide MLP (512 -> 4096 -> 4096 -> 512, 21 M parameters:
84 MB of float32 gradients) on a small batch, so that its gradients are
large beside its compute."""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import kolo.torch as kt


def wide_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(512, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096),
                               torch.nn.ReLU(), torch.nn.Linear(4096, 512))


def timed_steps(model, opt, steps, batch):
    x, y = batch
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def allreduce_time(fn, tensor, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(tensor)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def slowest(value):
    """The largest of every rank's value (a step is as slow as its slowest rank)."""
    return float(kt.allreduce(torch.tensor([value], dtype=torch.float64), op=kt.Max))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6, help="steps per method per round (the first of each is dropped)")
    ap.add_argument("--batch", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)  # one core per rank, for both methods
    kt.init()
    dist.init_process_group("gloo", rank=kt.rank(), world_size=kt.size())
    n, me = kt.size(), kt.rank()
    g = torch.Generator().manual_seed(me)
    batch = (torch.randn(args.batch, 512, generator=g), torch.randn(args.batch, 512, generator=g))

    kolo_model = wide_mlp()
    kolo_opt = kt.DistributedOptimizer(torch.optim.SGD(kolo_model.parameters(), lr=1e-4, momentum=0.9),
                                       named_parameters=kolo_model.named_parameters())
    ddp_model = torch.nn.parallel.DistributedDataParallel(wide_mlp())
    ddp_opt = torch.optim.SGD(ddp_model.parameters(), lr=1e-4, momentum=0.9)
    compute_model = wide_mlp()
    compute_opt = torch.optim.SGD(compute_model.parameters(), lr=1e-4, momentum=0.9)
    nparams = sum(p.numel() for p in kolo_model.parameters())

    times = {"kolo DistributedOptimizer": [], "DDP on Gloo": [], "compute alone (no communication)": []}
    runs = (("kolo DistributedOptimizer", kolo_model, kolo_opt), ("DDP on Gloo", ddp_model, ddp_opt),
            ("compute alone (no communication)", compute_model, compute_opt))
    for _ in range(args.rounds):
        for name, model, opt in runs:
            kt.allreduce(torch.zeros(1))  # start together
            times[name] += timed_steps(model, opt, args.steps, batch)[1:]
    grads = torch.randn(nparams, generator=g)
    ar = {"kolo allreduce_": allreduce_time(lambda t: kt.allreduce_(t, op=kt.Sum), grads, 5),
          "Gloo all_reduce": allreduce_time(dist.all_reduce, grads, 5)}
    medians = {k: slowest(statistics.median(v)) for k, v in times.items()}
    ar = {k: slowest(v) for k, v in ar.items()}
    if me == 0:
        print("%d processes, wide MLP: %.1f M parameters (%.0f MB of float32 gradients), batch %d per rank, "
              "%d rounds x %d steps per method, alternating" % (n, nparams / 1e6, nparams * 4 / 1e6, args.batch,
                                                                args.rounds, args.steps - 1))
        for k, v in medians.items():
            print("  step time median, %-34s %8.1f ms" % (k + ":", v * 1e3))
        print("  kolo / DDP-on-Gloo step time: %.2f" % (medians["kolo DistributedOptimizer"] / medians["DDP on Gloo"]))
        for k, v in ar.items():
            print("  one all-reduce of %.0f MB, %-18s %8.1f ms" % (nparams * 4 / 1e6, k + ":", v * 1e3))
        print("  fusion: %s" % {k: v for k, v in kolo_opt.kolo_stats().items() if k in ("steps", "allReduces", "rounds", "rebuilds")})
    dist.destroy_process_group()
    kt.shutdown()


if __name__ == "__main__":
    main()
