"""torch_ddp.py - a plain PyTorch DDP training script on kolo: it is the
usual Gloo script with the backend named "kolo" (and kolo.torch imported,
which registers it).  Nothing else of kolo appears.

    torchrun --nproc_per_node 2 examples/torch_ddp.py

Each rank trains on its own shard of a synthetic regression task; DDP
averages the gradients over kolo while backward runs.  The script checks
that the loss went down and that every rank ends with the same
parameters, and exits 1 otherwise."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import kolo.torch  # noqa: F401 - registers the "kolo" backend

dist.init_process_group(backend="kolo")  # was: backend="gloo"
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)

data = torch.Generator().manual_seed(1000 + rank)  # this rank's shard
truth = torch.randn(32, 1, generator=torch.Generator().manual_seed(7))
losses = []
for step in range(100):
    x = torch.randn(64, 32, generator=data)
    y = x @ truth + 0.01 * torch.randn(64, 1, generator=data)
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())

flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
everyone = [torch.empty_like(flat) for _ in range(world)]
dist.all_gather(everyone, flat)
same = all(torch.equal(f, flat) for f in everyone)
first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
print("rank %d of %d: loss %.4f -> %.4f; parameters identical on every rank: %s" % (rank, world, first, last, same))
dist.destroy_process_group()
raise SystemExit(0 if same and last < first / 4 else 1)
