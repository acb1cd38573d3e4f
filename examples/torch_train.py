"""torch_train.py - a PyTorch training script made data-parallel with kolo:
the four lines marked "kolo" are all it takes (Horovod's recipe).

    mpirun -np 2 python examples/torch_train.py
    torchrun --nproc_per_node 2 examples/torch_train.py   (or KOLO_ROOT, KOLO_RANK, KOLO_WORLD_SIZE)

Each rank trains on its own shard of a synthetic regression task; the
gradients are averaged by kolo's fusion layer while backward runs.  The
script checks that the loss went down and that every rank ends with the
same parameters, and exits 1 otherwise."""
import torch

import kolo.torch as kt

kt.init()  # kolo: join the job
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
optimizer = kt.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())  # kolo
kt.broadcast_parameters(model.state_dict(), root_rank=0)  # kolo: start from rank 0's model
kt.broadcast_optimizer_state(optimizer, root_rank=0)  # kolo: and its optimizer

data = torch.Generator().manual_seed(1000 + kt.rank())  # this rank's shard
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
same = bool((kt.allgather(flat.unsqueeze(0)) == flat).all())
first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
print("rank %d of %d: loss %.4f -> %.4f; parameters identical on every rank: %s" % (kt.rank(), kt.size(), first, last,
                                                                                   same))
kt.shutdown()
raise SystemExit(0 if same and last < first / 4 else 1)
