"""The kolo backend's host all-reduces, which run while the caller goes on
(_backend.py).

A host all_reduce is issued on the group's non-blocking twin communicator:
kolo's progress thread reduces it while the caller goes on (DDP's backward
keeps computing, as it does beside Gloo's work thread).  Its Work is one
over a future that a thread of the group completes, in issue order, once
kolo has finished the call.  The group's calls on its blocking
communicator first drain these, so a tensor reduced and then used by the
group's next call is seen reduced."""
import queue
import threading

import torch

from kolo._lib import KoloError


def named(error, what):
    """error (a KoloError) with its sentence led by `what`, once."""
    text = str(error)
    return error if text.startswith(what) else KoloError(error.code, "%s: %s" % (what, text))


class Completer:
    def __init__(self):
        self._pending = queue.Queue()
        self._thread = None

    def add(self, handle, what):
        """A future that gets handle.wait()'s result, or its error named by `what`."""
        future = torch.futures.Future()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kolo-backend", daemon=True)
            self._thread.start()
        self._pending.put((handle, future, what))
        return future

    def _run(self):
        while True:
            item = self._pending.get()
            if item is None:
                self._pending.task_done()
                return
            handle, future, what = item
            try:
                result = handle.wait()
            except KoloError as e:
                future.set_exception(named(e, what))
            except Exception as e:  # noqa: BLE001 - the Work's wait() raises it
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
