"""SyncBatchNorm (Horovod's horovod.torch.SyncBatchNorm): batch norm whose
batch statistics, in training, are those of every rank's batch together.

Per channel, the ranks' sums and value counts are summed over the ranks
(one allreduce), then their squared deviations from that mean (another),
so the mean and variance are those of the whole batch.  The sums go
through an autograd function whose gradient is the sum over the ranks of
the gradients, which gives each rank's input the gradient of the sum of
every rank's loss, as the whole batch in one process would.  The weight
and bias gradients stay this rank's (DistributedOptimizer averages them).

Evaluation with running statistics, and a job of one rank, use PyTorch's
own batch norm.  Every rank must call forward and backward alike."""
import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from kolo.torch import _comms
from kolo.torch._ops_names import Sum
from kolo.torch._reduce import allreduce


class _SumOverRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor):
        return allreduce(tensor, op=Sum)

    @staticmethod
    def backward(ctx, grad):
        return allreduce(grad.contiguous(), op=Sum)


def _channel_sums(x):
    return x.sum([0] + list(range(2, x.dim())))


class SyncBatchNorm(_BatchNorm):
    """torch.nn.BatchNorm{1,2,3}d's arguments; the input is (N, C, ...)
    with at least 2 dimensions, N may differ between ranks (0 too)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("kolo.torch.SyncBatchNorm: the input has %d dimension(s); it needs (N, C, ...)"
                             % input.dim())

    def _factor(self):
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            return 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        return 0.0

    def forward(self, input):
        self._check_input_dim(input)
        factor = self._factor()
        if (not self.training and self.track_running_stats) or _comms.size() == 1:
            use_batch = self.training or not self.track_running_stats
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, use_batch,
                                factor, self.eps)
        return self._synced(input, factor)

    def _synced(self, input, factor):
        x = input.to(torch.float64 if input.dtype == torch.float64 else torch.float32)
        shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
        count_here = torch.tensor([x.numel() // x.shape[1]], dtype=x.dtype, device=x.device)
        totals = _SumOverRanks.apply(torch.cat([_channel_sums(x), count_here]))
        count = float(totals[-1])
        if count <= 1:
            raise ValueError("kolo.torch.SyncBatchNorm: the ranks' batches hold %d value(s) per channel in all; "
                             "training needs more than 1" % count)
        mean = totals[:-1] / count
        centered = x - mean.view(shape)
        var = _SumOverRanks.apply(_channel_sums(centered * centered)) / count
        out = centered * torch.rsqrt(var + self.eps).view(shape)
        if self.weight is not None:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        if self.running_mean is not None and factor:
            self._update_running(mean.detach(), var.detach() * (count / (count - 1)), factor)
        return out.to(input.dtype)

    @torch.no_grad()
    def _update_running(self, mean, unbiased_var, factor):
        self.running_mean.mul_(1 - factor).add_(mean.to(self.running_mean.dtype), alpha=factor)
        self.running_var.mul_(1 - factor).add_(unbiased_var.to(self.running_var.dtype), alpha=factor)
