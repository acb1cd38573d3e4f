"""The kolo backend's Python Work (_backend.py)."""
import torch
import torch.distributed as dist

_WorkBase = getattr(dist, "_Work", None) or dist.Work


class KoloWork(_WorkBase):
    """A Python Work, for a queued send or recv (its first wait() or
    get_future() issues every queued one, as one kolo group) and for a call
    that failed (wait() raises kolo's sentence: PyTorch's Work over a
    future would return).  The group keeps the failed ones alive for C++
    callers, which hold only the C++ half of a Python Work."""

    def __init__(self, result, pg=None, peer=-1, finish=None, error=None):
        super().__init__()
        self._result, self._pg, self._source, self._finish = result, pg, peer, finish
        self._error, self._done, self._device, self._event = None, False, None, None
        self._future = torch.futures.Future()
        if pg is None:
            self._complete(error)

    def _complete(self, error, device=None):
        self._error, self._done, self._pg = error, True, None
        if error is None and device is not None:
            self._device, self._event = device, torch.cuda.Event()
            self._event.record(torch.cuda.current_stream(device))
        if error is not None:
            self._future.set_exception(error)
        else:
            self._future.set_result(self._result)

    def _issued(self):
        if not self._done:
            self._pg._flush()

    def wait(self, timeout=None):
        self._issued()
        if self._error is not None:
            raise self._error
        if self._event is not None:
            torch.cuda.current_stream(self._device).wait_event(self._event)
        return True

    def is_completed(self):
        return self._done and (self._event is None or self._event.query())

    def is_success(self):
        return self._done and self._error is None

    def exception(self):
        return self._error

    def get_future(self):
        self._issued()
        return self._future

    def result(self):
        self.wait()
        return self._result

    def source_rank(self):
        return self._source

    def _source_rank(self):
        return self._source

    def synchronize(self):
        self.wait()
