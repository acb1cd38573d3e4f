"""The job's communicators: one host communicator joined from the
launcher's variables (koloCommInitFromEnv), a CUDA one split from it for
this process's device (at init(device=...) or at the first CUDA call,
which every rank makes collectively), and, made the same way on first
use, a non-blocking twin of each for the async calls.

Every communicator here is used from one thread at a time: the caller's
(kolo's rule); the async ones under their Progress lock (_progress.py).
"""
import atexit
import os
import threading
import warnings

import torch

from kolo._lib import check, ffi, last_error, lib, macros

_lock = threading.RLock()
_state = {}  # "world", "cuda", "device", "async_host", "async_cuda", "rank", "size", "local"


def new_config(memory=None, blocking=None, device=None, timeout_ms=None):
    """A koloConfig_t from KOLO_CONFIG_INITIALIZER, with the fields given."""
    cfg = ffi.new("koloConfig_t *")
    undef = macros["KOLO_CONFIG_UNDEF"]
    cfg.size, cfg.magic, cfg.version = ffi.sizeof("koloConfig_t"), macros["KOLO_CONFIG_MAGIC"], macros["KOLO_VERSION_CODE"]
    for field in ("memory", "blocking", "timeoutMs", "bufferSize", "nChannels", "cudaDev", "minChannels", "maxChannels"):
        setattr(cfg, field, undef)
    for field, value in (("memory", memory), ("blocking", blocking), ("cudaDev", device), ("timeoutMs", timeout_ms)):
        if value is not None:
            setattr(cfg, field, value)
    return cfg


def initialized():
    return "world" in _state


def init(device=None, timeout_ms=None):
    """Joins the job (mpirun, srun, torchrun or KOLO_* variables); with
    device (a CUDA device or its index), also makes the CUDA communicator
    for it, collectively.  A second call does nothing."""
    with _lock:
        if "world" not in _state:
            cfg = new_config(memory=lib.koloMemHost, timeout_ms=timeout_ms)
            if os.environ.get("KOLO_ELASTIC_STORE"):  # a job of kolo.torch.elastic.launch
                from kolo.torch.elastic import _rendezvous

                adopt(_rendezvous.join(cfg, timeout_ms), timeout_ms)
            else:
                comm = ffi.new("koloComm_t *")
                check(lib.koloCommInitFromEnv(comm, cfg), None, "kolo.torch.init")
                adopt(comm[0], timeout_ms)
        if device is not None:
            cuda_comm(torch.device(device))


def adopt(comm, timeout_ms):
    """Makes `comm` the job's host communicator."""
    _state["world"] = comm
    _state["timeout_ms"] = timeout_ms
    value = ffi.new("int *")
    check(lib.koloCommUserRank(comm, value), comm)
    _state["rank"] = value[0]
    check(lib.koloCommCount(comm, value), comm)
    _state["size"] = value[0]
    atexit.register(shutdown)


def world():
    if "world" not in _state:
        raise RuntimeError("kolo.torch: call kolo.torch.init() first")
    return _state["world"]


def rank():
    world()
    return _state["rank"]


def size():
    world()
    return _state["size"]


def split(parent, memory, blocking=None, device=None, key=None, timeout_ms=None, color=0):
    """A communicator of every rank of `parent` (collective); key: this
    rank in `parent` (default: kolo.torch's rank in the job).  color
    KOLO_SPLIT_NOCOLOR: this rank joins none (None)."""
    comm = ffi.new("koloComm_t *")
    timeout_ms = _state.get("timeout_ms") if timeout_ms is None else timeout_ms
    cfg = new_config(memory=memory, blocking=blocking, device=device, timeout_ms=timeout_ms)
    key = _state["rank"] if key is None else key
    check(lib.koloCommSplit(parent, color, key, comm, cfg), parent, "kolo.torch: making a communicator")
    if comm[0] == ffi.NULL:
        return None
    if blocking == 0:  # a non-blocking split returns before its init is done
        wait_ready(comm[0])
    return comm[0]


def wait_ready(comm):
    status = ffi.new("koloResult_t *")
    while True:
        check(lib.koloCommGetAsyncError(comm, status), comm)
        if status[0] != lib.koloInProgress:
            return check(status[0], comm)


def _device_index(device):
    return torch.cuda.current_device() if device.index is None else device.index


def cuda_comm(device):
    """The CUDA communicator, made on first use for `device` (collective);
    a tensor on another device is refused with a sentence."""
    with _lock:
        world()
        index = _device_index(device)
        if "cuda" not in _state:
            _state["cuda"] = split(_state["world"], lib.koloMemCuda, device=index)
            _state["device"] = index
        elif _state["device"] != index:
            raise ValueError("kolo.torch: this process's CUDA communicator is on cuda:%d; a tensor on cuda:%d "
                             "cannot use it (one device per process: init(device=...))" % (_state["device"], index))
        return _state["cuda"]


def async_comm(kind):
    """The non-blocking host communicator ("host"), or the CUDA one
    ("cuda": CUDA calls are asynchronous already), made on first use."""
    with _lock:
        if kind == "cuda":
            return _state["cuda"]
        if "async_host" not in _state:
            _state["async_host"] = split(world(), lib.koloMemHost, blocking=0)
        return _state["async_host"]


_on_shutdown = []  # fusions and the like, closed before the communicators
_aborting = [False]  # [True] while shutdown(abort=True) runs (elastic's reset)


def on_shutdown(close):
    _on_shutdown.append(close)


def shutdown(abort=False):
    """Destroys kolo.torch's communicators (after the fusions that use them);
    abort: with koloCommAbort (elastic's reset: peers may be gone)."""
    with _lock:
        _aborting[0] = abort
        try:
            while _on_shutdown:
                _on_shutdown.pop()()
            for key in ("async_host", "cuda", "world"):
                comm = _state.pop(key, None)
                if comm is not None:
                    destroy(comm, key)
        finally:
            _state.clear()
            _aborting[0] = False


def destroy(comm, what):
    """koloCommDestroy (koloCommAbort during shutdown(abort=True)); a failure
    is said (a warning: the communicator is gone either way)."""
    res = (lib.koloCommAbort if _aborting[0] else lib.koloCommDestroy)(comm)
    if res != lib.koloSuccess:
        warnings.warn("kolo.torch: destroying the %s communicator: %s" % (what, last_error()))
