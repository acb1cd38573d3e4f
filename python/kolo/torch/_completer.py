"""Futures of calls on a non-blocking host communicator, completed by a
thread of their own (_progress.py says when a call is done).

The "kolo" backend's host all-reduces (_backend.py) and kolo_hook's host
buckets (_ddp_hook.py) are issued on a non-blocking twin communicator:
kolo's progress thread reduces them while the caller goes on (DDP's
backward keeps computing, as it does beside Gloo's work thread).  Each
gets a future that a Completer's thread completes, in issue order, once
kolo has finished the call.  The backend's calls on its blocking
communicator first drain its Completer, so a tensor reduced and then used
by the group's next call is seen reduced."""
import queue
import threading

import torch

from kolo._lib import KoloError


def named(error, what):
    """error (a KoloError) with its sentence led by `what`, once."""
    text = str(error)
    return error if text.startswith(what) else KoloError(error.code, "%s: %s" % (what, text))


class Completer:
    def __init__(self, name):
        self._name = name
        self._pending = queue.Queue()
        self._thread = None

    def add(self, handle, what=None, finish=None):
        """A future that gets handle.wait()'s result (passed through
        finish when given), or its error: a KoloError led by `what` when
        given, else as raised."""
        future = torch.futures.Future()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._pending.put((handle, future, what, finish))
        return future

    def _run(self):
        while True:
            item = self._pending.get()
            if item is None:
                self._pending.task_done()
                return
            handle, future, what, finish = item
            try:
                result = handle.wait()
                if finish is not None:
                    result = finish(result)
            except KoloError as e:
                future.set_exception(named(e, what) if what else e)
            except Exception as e:  # noqa: BLE001 - the Work's wait() or DDP's backward raises it
                future.set_exception(e)
            else:
                future.set_result(result)
            self._pending.task_done()

    def drain(self):
        """Returns once every call added so far is complete (its results
        copied out, or its error in its future)."""
        if self._thread is not None:
            self._pending.join()

    def stop(self):
        """Drains, then ends the thread."""
        if self._thread is not None:
            self._pending.put(None)
            self._pending.join()
            self._thread.join()
            self._thread = None
