"""The small models and synthetic data of the training tests: each rank's
batch of a step is made from the step, the pass and the rank, so every
rank can also make the union of all ranks' batches."""
import torch

from reference import generator

IN = 16


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(IN, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 4))


def cnn():
    return torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 4))


MODELS = {"mlp": mlp, "cnn": cnn}


def batch(kind, step, pss, rank, size=16):
    """(inputs, targets): targets from a fixed random teacher."""
    g = generator("batch", kind, step, pss, rank)
    x = torch.randn((size, IN) if kind == "mlp" else (size, 1, 10, 10), generator=g)
    teacher = torch.randn(x[0].numel(), 4, generator=generator("teacher"))
    return x, torch.sin(x.reshape(size, -1) @ teacher / 4)


def union(kind, step, pss, n):
    xs, ys = zip(*(batch(kind, step, pss, r) for r in range(n)))
    return torch.cat(xs), torch.cat(ys)


def loss_fn(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)
