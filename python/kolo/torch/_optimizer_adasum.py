"""DistributedOptimizer(op=Adasum): Horovod's Adasum optimizer, a delta
optimizer.

Horovod's meaning: with Adasum it is not the gradients that are combined
but what the wrapped optimizer would change: each rank takes its own
optimizer step on its own gradients, the change of each parameter (the
delta) is combined over the ranks with Adasum (koloAdasum, one call per
parameter, so each has its own dot products and norms), and every rank
sets each parameter to its value before the step plus the combined delta.
So the learning rate is the one for a single rank: Adasum does not sum
the ranks' steps (nearly parallel deltas average, orthogonal ones add),
and, as in Horovod's CPU Adasum, it is not scaled by the number of ranks.

Here the local step is one step of the wrapped optimizer over all its
parameters (Horovod steps each parameter alone, with the parameter zeroed
first); the deltas are combined in step(), in the order of the
optimizer's parameters, which is the same on every rank (no combine runs
while backward runs)."""
import contextlib

import torch

from kolo.torch import _adasum
from kolo.torch._ops_names import Adasum
from kolo.torch._reduce import grouped_allreduce_

_WHAT = "kolo.torch.DistributedOptimizer(op=Adasum)"


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    def __init__(self, params, compression, backward_passes_per_step, predivide, process_set):
        super(self.__class__, self).__init__(params)
        _check_arguments(backward_passes_per_step, predivide)
        self._compression, self._process_set = compression, process_set
        self._adasum_params = [p for g in self.param_groups for p in g["params"] if p.requires_grad]
        for p in self._adasum_params:
            if p.dtype not in _adasum.FLOATS:
                raise TypeError("%s: a parameter is %s: Adasum combines float16, bfloat16, float32 or float64" %
                                (_WHAT, p.dtype))

    def synchronize(self):
        """Nothing to wait for: the deltas are combined in step()."""

    def skip_synchronize(self):
        """For code written for the averaging optimizer; changes nothing here."""
        return contextlib.nullcontext()

    @torch.no_grad()
    def step(self, closure=None):
        """The wrapped optimizer's step on this rank's gradients, then each
        parameter = its value before + Adasum of the ranks' deltas."""
        start = [p.detach().clone() for p in self._adasum_params]
        loss = super(self.__class__, self).step(closure)
        deltas = [self._wire(p.detach() - s) for p, s in zip(self._adasum_params, start)]
        grouped_allreduce_(deltas, op=Adasum, process_set=self._process_set)
        for p, s, d in zip(self._adasum_params, start, deltas):
            p.copy_(s + d.to(p.dtype))
        return loss

    def _wire(self, delta):
        """The delta in the compression's dtype (float16 or bfloat16 on the wire)."""
        return delta.to(self._compression.wire_dtype(delta.dtype))


def _check_arguments(passes, predivide):
    if passes < 1:
        raise ValueError("%s: backward_passes_per_step is %d, not 1 or more" % (_WHAT, passes))
    if float(predivide) != 1.0:
        raise ValueError("%s: gradient_predivide_factor %g: Adasum divides nothing (it needs 1.0)" %
                         (_WHAT, float(predivide)))


def distributed_adasum_optimizer(optimizer, compression, backward_passes_per_step, predivide, process_set):
    """The optimizer's class, extended as above, over its param_groups."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedAdasumOptimizer.__dict__))
    return cls(optimizer.param_groups, compression, backward_passes_per_step, predivide, process_set)
