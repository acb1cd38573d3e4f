"""horovod_train.py - a training script written for Horovod, run on kolo by
changing one line: `import horovod.torch as hvd` became the import below.
Everything else is Horovod's documented API as its PyTorch examples use it:
init, the sampler sharded by rank, the learning rate scaled by size, the
DistributedOptimizer with fp16 compression, broadcast of the parameters and
the optimizer state, metrics averaged with a named allreduce, a barrier.

    mpirun -np 2 python examples/horovod_train.py [--fp16-allreduce]
    torchrun --nproc_per_node 2 examples/horovod_train.py

The data are synthetic 28x28 "digits" (a fixed random template per class
plus noise), so the script needs no download.  It checks that the test
loss went down and that every rank ends with the same parameters, and
exits 1 otherwise."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data.distributed

import kolo.torch as hvd  # was: import horovod.torch as hvd

parser = argparse.ArgumentParser(description="Horovod-style training on synthetic digits")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.02)
parser.add_argument("--fp16-allreduce", action="store_true", default=False)
args = parser.parse_args()


def synthetic_digits(n, seed):
    g = torch.Generator().manual_seed(seed)
    templates = torch.randn(10, 1, 28, 28, generator=torch.Generator().manual_seed(99))
    labels = torch.randint(0, 10, (n,), generator=g)
    images = templates[labels] + 0.5 * torch.randn(n, 1, 28, 28, generator=g)
    return torch.utils.data.TensorDataset(images, labels)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=5)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=5)
        self.fc1 = nn.Linear(256, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = F.relu(self.fc1(x.flatten(1)))
        return F.log_softmax(self.fc2(x), dim=1)


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value), name=name).item()


def evaluate(model, loader, sampler):
    model.eval()
    loss = 0.0
    with torch.no_grad():
        for data, target in loader:
            loss += F.nll_loss(model(data), target, reduction="sum").item()
    return metric_average(loss / len(sampler), "avg_loss")


hvd.init()
torch.manual_seed(42)
torch.set_num_threads(1)

train_set, test_set = synthetic_digits(1024, 1), synthetic_digits(256, 2)
train_sampler = torch.utils.data.distributed.DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank())
test_sampler = torch.utils.data.distributed.DistributedSampler(test_set, num_replicas=hvd.size(), rank=hvd.rank())
train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
test_loader = torch.utils.data.DataLoader(test_set, batch_size=args.batch_size, sampler=test_sampler)

model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), compression=compression,
                                     op=hvd.Average)

before = evaluate(model, test_loader, test_sampler)
for epoch in range(args.epochs):
    model.train()
    train_sampler.set_epoch(epoch)
    for data, target in train_loader:
        optimizer.zero_grad()
        F.nll_loss(model(data), target).backward()
        optimizer.step()
    loss = evaluate(model, test_loader, test_sampler)
    if hvd.rank() == 0:
        print("epoch %d: test loss %.4f (rank 0 of %d, %d host(s))" % (epoch, loss, hvd.size(), hvd.cross_size()))
hvd.barrier()

flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
same = bool((hvd.allgather(flat.unsqueeze(0)) == flat).all())
print("rank %d: test loss %.4f -> %.4f; parameters identical on every rank: %s" % (hvd.rank(), before, loss, same))
raise SystemExit(0 if same and loss < before / 2 else 1)
