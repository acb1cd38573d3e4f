"""Horovod's elastic training for kolo.torch (horovod.torch.elastic's names).

    import kolo.torch as kt
    kt.init()
    ...
    @kt.elastic.run
    def train(state):
        while state.step < steps:
            ...                                  # one step
            state.step += 1
            state.commit()

    train(kt.elastic.TorchState(model=model, optimizer=optimizer, step=0))

The job runs under kolo.torch.elastic.launch, which keeps a store open for
the job's generations (_rendezvous.py).  When a collective fails because a
peer is gone (KoloError koloRemoteError, koloTimeout or koloSystemError),
run() restores the last commit, and every survivor shuts kolo.torch down
(aborting its communicators), joins the next generation (a fresh kolo
unique id, ranks renumbered densely in the old order), adds its process
sets again over the new ranks (_sets.py: a set that lost a worker is
dropped), makes its DistributedOptimizers' fusions again, calls the reset
callbacks, and runs the function again after sync() (the state of the
new rank 0).
When a worker is added, commit() (check_host_updates) raises
HostsUpdatedInterrupt on every rank at the same commit, and the same
reset follows without a restore; the new worker joins in kt.init().
"""
import copy
import functools

import torch

from kolo._lib import KoloError, lib
from kolo.torch import _comms, _handle, _local, _optimizer
from kolo.torch._copies import broadcast_
from kolo.torch._state_sync import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from kolo.torch.elastic import _rendezvous, _sets

__all__ = ["run", "State", "ObjectState", "TorchState", "HostsUpdatedInterrupt"]


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by commit() / check_host_updates() on every rank at the same
    commit when workers were added to (or removed from) the job."""


def _peer_failed(e):
    return e.code in (lib.koloRemoteError, lib.koloTimeout, lib.koloSystemError)


class State:
    """What training keeps across resets (Horovod's State): save(),
    restore() and sync() are the subclass's."""

    def __init__(self):
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions called, in order, after every reset (a worker lost or added)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state (in host memory), then check_host_updates()."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt if the job has a newer generation
        than this worker's: rank 0 asks the store and broadcasts the answer,
        so every rank raises at the same call (one 8-byte broadcast)."""
        if not _elastic():
            return
        newest = torch.tensor([_rendezvous.newest() if _comms.rank() == 0 else 0], dtype=torch.int64)
        broadcast_(newest, 0)
        if int(newest[0]) > _rendezvous.generation():
            raise HostsUpdatedInterrupt("kolo.torch.elastic: generation %d is newer than this worker's %d"
                                        % (int(newest[0]), _rendezvous.generation()))

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()


class ObjectState(State):
    """Plain Python objects, given as keyword arguments and kept as
    attributes: save() copies them, restore() puts the copies back, sync()
    gives every rank rank 0's saved values (broadcast_object)."""

    def __init__(self, **kwargs):
        self._saved = copy.deepcopy(kwargs)
        for name, value in kwargs.items():
            setattr(self, name, value)
        super().__init__()

    def save(self):
        self._saved = {name: copy.deepcopy(getattr(self, name)) for name in self._saved}

    def restore(self):
        self._set_attributes()

    def sync(self):
        if self._saved:
            self._saved = broadcast_object(self._saved, 0)
            self._set_attributes()

    def _set_attributes(self):
        for name, value in copy.deepcopy(self._saved).items():
            setattr(self, name, value)


class TorchState(ObjectState):
    """A model, an optimizer (its state_dict: the wrapped optimizer's
    state) and any other attributes (ObjectState's).  sync() broadcasts
    rank 0's parameters, buffers and optimizer state, then commits them,
    so a worker that just joined starts from rank 0's commit."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.model, self.optimizer = model, optimizer
        self._saved_model = self._saved_optimizer = None
        super().__init__(**kwargs)
        self._save_torch()

    def _save_torch(self):
        if self.model is not None:
            self._saved_model = copy.deepcopy(self.model.state_dict())
        if self.optimizer is not None:
            self._saved_optimizer = copy.deepcopy(self.optimizer.state_dict())

    def save(self):
        self._save_torch()
        super().save()

    def restore(self):
        if self.model is not None:
            self.model.load_state_dict(self._saved_model)
        if self.optimizer is not None:
            self.optimizer.load_state_dict(self._saved_optimizer)
        super().restore()

    def sync(self):
        if self.model is not None:
            broadcast_parameters(self.model.state_dict(), root_rank=0)
        if self.optimizer is not None:
            broadcast_optimizer_state(self.optimizer, root_rank=0)
        super().sync()
        self._save_torch()


def _elastic():
    return "gen" in _rendezvous._conn


def _reset():
    """kolo.torch again, on the next generation's ranks."""
    timeout_ms = _comms._state.get("timeout_ms")
    sets = _sets.before_reset()
    _comms.shutdown(abort=True)  # the fusions, process sets and communicators of the old generation
    _handle._progress.clear()
    _local._cached.clear()
    cfg = _comms.new_config(memory=lib.koloMemHost, timeout_ms=timeout_ms)
    _comms.adopt(_rendezvous.join(cfg, timeout_ms, after=_rendezvous.generation()), timeout_ms)
    _local.topology()  # collective, as kt.init() on a worker that joins now
    _sets.after_reset(sets)  # collective, as _sets.at_init() there
    _optimizer.reopen_all()


def run(func):
    """Horovod's @elastic.run: func(state, ...) runs until it returns; a
    peer lost (KoloError) restores the last commit, HostsUpdatedInterrupt
    keeps the state; either way kolo.torch is reset on the next
    generation, the reset callbacks run, and func runs again after
    state.sync().  Other errors end it."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not _elastic():
            raise RuntimeError("kolo.torch.elastic.run: this worker did not join through kolo.torch.elastic's "
                               "rendezvous (run it under python -m kolo.torch.elastic.launch, then kt.init())")
        reset = False
        while True:
            try:
                if reset:
                    _reset()
                    state.on_reset()
                state.sync()
                return func(state, *args, **kwargs)
            except KoloError as e:
                if not _peer_failed(e):
                    raise
                state.restore()
            except HostsUpdatedInterrupt:
                pass
            reset = True
    return wrapper
