"""DistributedOptimizer: gradients averaged over the ranks through kolo's
fusion layer (kolo_fusion.h) while backward produces them.

Each parameter's gradient is declared to a koloFusion_t once, in reverse
parameter order (about backward's order; the fusion rebuilds its buckets
in the order it observes after the first step).  A hook on each
parameter's gradient accumulator (torch 1.13 has no post-accumulate hook)
marks it ready as soon as backward has accumulated it; the fusion's thread
reduces complete buckets while backward goes on.  step() ends the fusion's
step and waits for it (host), or makes the current stream wait for the
fusion's stream (CUDA), then runs the wrapped optimizer.

Where a gradient lives (DDP's gradient_as_bucket_view):
  - a contiguous parameter's gradient IS a view into kolo's bucket
    (KOLO_FUSION_ALLOCATE): backward accumulates into the bucket, which is
    reduced in place, with no copy;
  - a dense but not contiguous one (channels_last) stays PyTorch's and is
    reduced where it is, through the fusion buffer (KOLO_FUSION_EXTERNAL);
  - with Compression.fp16 (bf16), a float32/float64 gradient stays
    PyTorch's; the hook casts it into a float16 (bfloat16) bucket view,
    step() casts the average back.

gradient_predivide_factor f (Horovod's): the fusion multiplies every
gradient by 1/f before the sum (its preScale) and averages; step() then
multiplies by f.  A sparse gradient (an embedding's) is reduced as dense
with sparse_as_dense=True, and refused with a sentence otherwise.
"""
import contextlib
import weakref

import torch

from kolo._lib import KoloError, lib
from kolo.torch import _comms
from kolo.torch._compression import Compression
from kolo.torch._dtypes import kolo_type
from kolo.torch._fusion import Fusion
from kolo.torch import _join
from kolo.torch._ops_names import Adasum, Average, Sum, op_name
from kolo.torch._optimizer_adasum import distributed_adasum_optimizer
from kolo.torch._placement import memory_kind
from kolo.torch._process_sets import global_process_set, member

_WHAT = "kolo.torch.DistributedOptimizer"
VIEW, EXTERNAL, CAST = "view", "external", "cast"
_made = []  # weak references to every DistributedOptimizer, in the (collective) order they were made


def _dense(t):
    """Non-overlapping and dense: its elements fill [data_ptr, +numel) in some order."""
    dims = sorted((s, n) for s, n in zip(t.stride(), t.shape) if n != 1)
    expect = 1
    for stride, n in dims:
        if stride != expect:
            return False
        expect *= n
    return True


def _mode(p, compression):
    if compression.wire_dtype(p.dtype) != p.dtype:
        return CAST
    if p.is_contiguous():
        return VIEW
    if _dense(p):
        return EXTERNAL
    raise ValueError("%s: a parameter of shape %s has overlapping or sparse strides %s: kolo reduces dense "
                     "gradients only" % (_WHAT, tuple(p.shape), p.stride()))


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op, predivide,
                 sparse_as_dense, process_set):
        super(self.__class__, self).__init__(params)
        _check_arguments(op, backward_passes_per_step, predivide)
        self._process_set = member(process_set, _WHAT)
        _join.negotiate(_join.SETUP, _WHAT, [], self._process_set)
        self._passes, self._sparse_as_dense = backward_passes_per_step, sparse_as_dense
        self._predivide = float(predivide)
        self._synchronized = False
        self._names = _names(self.param_groups, named_parameters)
        self._params = _reduced_params(self.param_groups)
        self._kind, self._device = memory_kind(self._params, _WHAT) if self._params else ("host", None)
        self._modes = {p: _mode(p, compression) for p in self._params}
        self._wire = {p: compression.wire_dtype(p.dtype) for p in self._params}
        self._op, self._closed = op, False
        self._setup_fusion(op)
        self._delay = {p: self._passes for p in self._params}
        self._accumulators = [self._hook(p) for p in self._params]
        self._join_index = _join.register_optimizer(self) if self._process_set is global_process_set else None
        _comms.on_shutdown(self._close)
        _made.append(weakref.ref(self))

    def _reopen(self):
        """After kolo.torch was shut down and initialized again (elastic's
        reset): the fusion made again on the new job's communicators, as
        __init__ made it (collective, in the order the optimizers were made)."""
        if self._process_set.process_set_id is None:
            raise ValueError("%s: made with process_set %r, which kolo.torch's reset dropped (%s): make the "
                             "optimizer again" % (_WHAT, self._process_set, self._process_set.dropped))
        _join.negotiate(_join.SETUP, _WHAT, [], self._process_set)
        self._setup_fusion(self._op)
        self._closed, self._synchronized = False, False
        self._delay = {p: self._passes for p in self._params}
        global_set = self._process_set is global_process_set
        self._join_index = _join.register_optimizer(self) if global_set else None
        _comms.on_shutdown(self._close)

    # ---- setup ----------------------------------------------------------
    def _setup_fusion(self, op):
        memory = lib.koloMemCuda if self._kind == "cuda" else lib.koloMemHost
        index = None
        self._stream = None
        if self._kind == "cuda":
            index = self._device.index if self._device.index is not None else torch.cuda.current_device()
            self._stream = torch.cuda.Stream(device=self._device)
        self._comm = _comms.split(self._process_set.host(), memory, device=index)
        self._fusion = Fusion(self._comm, op, self._stream.cuda_stream if self._stream else None,
                              prescale=1.0 / self._predivide)
        self._ids = {}
        for p in reversed(self._params):  # backward meets the last parameters first
            storage = lib.KOLO_FUSION_EXTERNAL if self._modes[p] == EXTERNAL else lib.KOLO_FUSION_ALLOCATE
            self._ids[p] = self._fusion.add(p.numel(), kolo_type(self._wire[p], "%s: parameter %s" % (_WHAT, self._names[p])), storage)
        self._fusion.commit()
        self._views = {}
        self._bind_views(first=True)

    def _bind_views(self, first):
        """Points each VIEW gradient at its bucket view (first: keeping what
        the gradient held; after a rebuild kolo moved the contents itself)."""
        self._version = self._fusion.version()
        with torch.no_grad():
            for p in self._params:
                if self._modes[p] == EXTERNAL:
                    continue
                view = self._fusion.view(self._ids[p], p.shape, self._wire[p], p.device)
                self._views[p] = view
                if self._modes[p] == VIEW:
                    if first:
                        view.copy_(p.grad) if p.grad is not None else view.zero_()
                    p.grad = view

    def _hook(self, p):
        accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
        accumulator.register_hook(lambda _, incoming: self._gradient_ready(p, incoming))
        return accumulator

    # ---- backward -------------------------------------------------------
    def _gradient_ready(self, p, incoming):
        if incoming and incoming[0] is not None and incoming[0].is_sparse and not self._sparse_as_dense:
            raise RuntimeError("%s: the gradient of %s is sparse: kolo reduces dense gradients; pass "
                               "sparse_as_dense=True" % (_WHAT, self._names[p]))
        self._delay[p] -= 1
        if self._delay[p] > 0:
            return
        if self._delay[p] < 0:
            raise RuntimeError("%s: the gradient of %s was computed %d times, more than backward_passes_per_step "
                               "(%d), before step()" % (_WHAT, self._names[p], self._passes - self._delay[p], self._passes))
        mode, buf = self._modes[p], None
        with torch.no_grad():
            if mode == VIEW and (p.grad.is_sparse or p.grad.data_ptr() != self._views[p].data_ptr()):
                # the gradient was replaced (set to None, assigned, or sparse): back to the view
                self._views[p].copy_(p.grad.to_dense())
                p.grad = self._views[p]
            elif mode == CAST:
                self._views[p].copy_(p.grad.to_dense())
            elif mode == EXTERNAL:
                buf = p.grad.data_ptr()
        event = None
        if self._kind == "cuda":
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(self._device))
        self._fusion.mark(self._ids[p], buf, event.cuda_event if event is not None else None)

    # ---- step -----------------------------------------------------------
    def synchronize(self):
        """Waits until every gradient of the step is reduced (CUDA: the
        current stream waits for it), and points the gradients at moved
        bucket views after a rebuild."""
        if not self._fusion.step_open:
            if any(d != self._passes for d in self._delay.values()):
                raise RuntimeError("%s: step() before backward produced every gradient" % _WHAT)
            return
        if self._join_index is not None:  # the control round: a joined rank answers with zeros
            _join.negotiate(_join.STEP, _WHAT + ".step", [self._join_index], self._process_set,
                            cuda=self._kind == "cuda")
        unmarked = [self._names[p] for p in self._params if self._delay[p] != 0]
        try:
            self._fusion.end(wait=self._kind == "host")
        except KoloError as e:
            if unmarked:
                e.args = ("%s (on this rank backward produced no gradient for %s)" % (e.args[0], ", ".join(unmarked)),)
            raise
        finally:
            self._delay = {p: self._passes for p in self._params}
        if self._kind == "cuda":
            torch.cuda.current_stream(self._device).wait_stream(self._stream)
        if self._fusion.version() != self._version:
            self._bind_views(first=False)
        self._unpack()
        self._synchronized = True

    def _join_step(self):
        """A joined rank's part in the others' step: zero gradients, every
        one marked ready, reduced as theirs are (kolo.torch.join)."""
        zeros = []
        with torch.no_grad():
            for p in reversed(self._params):
                mode = self._modes[p]
                if mode == VIEW:
                    self._views[p].zero_()
                    p.grad = self._views[p]
                elif p.grad is None:
                    p.grad = torch.zeros_like(p)
                else:
                    p.grad.zero_()
                if mode == CAST:
                    self._views[p].zero_()
                zeros.append(p.grad)
                self._delay[p] = 0
                self._fusion.mark(self._ids[p], p.grad.data_ptr() if mode == EXTERNAL else None)
        self.synchronize()
        self._synchronized = False

    @torch.no_grad()
    def _unpack(self):
        """Cast gradients take their averages back; a predivide factor is undone."""
        for p in self._params:
            if self._modes[p] == CAST:
                p.grad.copy_(self._views[p])
        if self._predivide != 1.0 and self._params:
            torch._foreach_mul_([p.grad for p in self._params], self._predivide)

    @contextlib.contextmanager
    def skip_synchronize(self):
        """For a step() right after an explicit synchronize() (gradient clipping)."""
        self._skip = True
        try:
            yield
        finally:
            self._skip = False

    def step(self, closure=None):
        if not getattr(self, "_skip", False) or not self._synchronized:
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=False):
        """Zeroes the gradients in place, bucket views included, or with
        set_to_none drops them as PyTorch does: backward then makes a new
        gradient where it would have added into the zeroed view, and the
        hook copies it into the view (one pass over the gradient, where
        zeroing and adding took two)."""
        if self._fusion.step_open:
            raise RuntimeError("%s: zero_grad() while gradients are being reduced: call step() or "
                               "synchronize() first" % _WHAT)
        with torch.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.zero_()

    def kolo_stats(self):
        """The fusion's counters (koloFusionGetStats): steps, allReduces, rebuilds, ..."""
        return self._fusion.stats()

    def _close(self):
        """Before the fusion goes: gradients that are bucket views become copies."""
        with torch.no_grad():
            for p in self._params:
                if self._modes[p] == VIEW and p.grad is not None:
                    p.grad = p.grad.clone()
        self._fusion.destroy()
        _comms.destroy(self._comm, "DistributedOptimizer's")
        self._closed = True


def reopen_all():
    """Every live DistributedOptimizer closed by a shutdown, made again on the
    current communicators (elastic's reset), in the order they were made."""
    for ref in list(_made):
        opt = ref()
        if opt is None:
            _made.remove(ref)
        elif opt._closed:
            opt._reopen()


def _check_arguments(op, passes, predivide):
    if op not in (Average, Sum):
        raise ValueError("%s: op %s: gradients are averaged (Average) or summed (Sum), or the steps combined "
                         "with Adasum" % (_WHAT, op_name(op)))
    if passes < 1:
        raise ValueError("%s: backward_passes_per_step is %d, not 1 or more" % (_WHAT, passes))
    if not float(predivide) > 0 or float(predivide) == float("inf"):
        raise ValueError("%s: gradient_predivide_factor is %r, not a finite number above 0" % (_WHAT, predivide))
    if float(predivide) != 1.0 and op != Average:
        raise ValueError("%s: gradient_predivide_factor %g needs op Average, not %s" % (_WHAT, predivide, op_name(op)))


def _names(param_groups, named_parameters):
    params = [p for g in param_groups for p in g["params"]]
    if named_parameters is None:
        return {p: "parameter %d" % i for i, p in enumerate(params)}
    named = list(named_parameters)
    names = {}
    for name, p in named:
        names.setdefault(p, name)
    missing = [i for i, p in enumerate(params) if p not in names]
    if missing:
        raise ValueError("%s: named_parameters lacks %d of the optimizer's parameters (the first is parameter %d "
                         "of its groups)" % (_WHAT, len(missing), missing[0]))
    return names


def _reduced_params(param_groups):
    seen, out = set(), []
    for group in param_groups:
        for p in group["params"]:
            if p.requires_grad and p not in seen:
                seen.add(p)
                out.append(p)
    return out


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1,
                         op=Average, gradient_predivide_factor=1.0, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps `optimizer` (Horovod's API): its gradients are averaged over
    every rank (op=Sum: summed) by kolo's fusion layer while backward runs;
    with process_set, over its ranks only (the others may not wrap one).
    gradient_predivide_factor f: gradients are multiplied by 1/f before
    the sum and by f / size after it (op Average).  sparse_as_dense: reduce
    sparse gradients as dense ones (else they are refused).
    Collective: every rank (of the set) wraps the same parameters, in the
    same order.
    op=Adasum: Horovod's Adasum optimizer: each rank steps on its own
    gradients and the parameters' changes are combined with Adasum in
    step() (_optimizer_adasum.py; the learning rate is a single rank's)."""
    if op is Adasum:
        return distributed_adasum_optimizer(optimizer, compression, backward_passes_per_step,
                                            gradient_predivide_factor, process_set)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, sparse_as_dense, process_set)
