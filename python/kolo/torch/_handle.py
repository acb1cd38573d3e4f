"""Handles of async calls: poll(handle), synchronize(handle).

Host calls run on the non-blocking host communicator (_progress.py); CUDA
calls are enqueued on PyTorch's current stream, and their handle holds a
CUDA event recorded after them.  A handle keeps its tensors alive until
it is synchronized; synchronize returns the call's result."""
import torch

from kolo._lib import check, ffi
from kolo.torch import _comms
from kolo.torch._placement import comm_and_stream
from kolo.torch._progress import Progress

_progress = {}  # async host communicator -> its Progress


class Handle:
    def __init__(self, finish, keep, seq=None, progress=None, event=None, device=None):
        self._finish, self._keep = finish, keep
        self._seq, self._progress = seq, progress
        self._event, self._device = event, device
        self._result, self._done = None, False

    def poll(self):
        if self._done or self._event is None and self._progress.poll(self._seq):
            return True
        return self._event is not None and self._event.query()

    def wait(self):
        if not self._done:
            if self._event is not None:  # later work on the current stream waits for the call
                torch.cuda.current_stream(self._device).wait_event(self._event)
            else:
                self._progress.wait(self._seq)
            self._result, self._done, self._keep = self._finish(), True, None
        return self._result


def host_progress():
    comm = _comms.async_comm("host")
    if comm not in _progress:
        _progress[comm] = Progress(comm)
    return _progress[comm]


def run(kind, device, call, what, finish, keep, async_, comms=None):
    """Issues call(comm, stream) on the right communicator (kolo.torch's,
    or those of `comms`: an object with comm_and_stream(kind, device) and
    host_progress(), as a process group of the "kolo" backend).  Blocking:
    runs it and returns finish(); async: returns a Handle."""
    if not async_ or kind == "cuda":
        comm, stream = (comms.comm_and_stream if comms is not None else comm_and_stream)(kind, device)
        check(call(comm, stream), comm, what)
        if not async_:
            return finish()
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
        return Handle(finish, keep, event=event, device=device)
    progress = comms.host_progress() if comms is not None else host_progress()
    seq = progress.issue(lambda comm: call(comm, ffi.NULL), what)
    return Handle(finish, keep, seq=seq, progress=progress)


def poll(handle):
    """True when the async call of `handle` has finished (host: False while
    calls issued before or after it on the async communicator still run)."""
    return handle.poll()


def synchronize(handle):
    """Waits for the async call of `handle` and returns its result (CUDA:
    the current stream waits; the host does not block)."""
    return handle.wait()
