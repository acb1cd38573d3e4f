"""Completion of calls on a non-blocking host communicator.

kolo runs such calls on the communicator's progress thread in issue
order, and koloCommGetAsyncError says koloInProgress until every call
issued so far has finished.  So a call numbered n is done once a query
finds the communicator idle after it was issued: a handle waits for the
calls issued before it, and may wait for those issued after it (until
the communicator is idle), never for anything else.
"""
import threading
import time

from kolo._lib import check, ffi, lib


class Progress:
    def __init__(self, comm):
        self.comm = comm
        self.lock = threading.Lock()  # kolo: one thread at a time per communicator
        self.issued = 0
        self.done = 0
        self._status = ffi.new("koloResult_t *")

    def issue(self, call, what):
        """Runs call(comm) (a kolo call) under the lock; its number."""
        with self.lock:
            check(call(self.comm), self.comm, what)
            self.issued += 1
            return self.issued

    def poll(self, seq):
        """True once call `seq` has finished; KoloError if the communicator failed."""
        if seq <= self.done:
            return True
        with self.lock:
            issued = self.issued
            check(lib.koloCommGetAsyncError(self.comm, self._status), self.comm)
            if self._status[0] == lib.koloInProgress:
                return False
            check(self._status[0], self.comm)
            self.done = max(self.done, issued)
        return seq <= self.done

    def wait(self, seq):
        """Blocks until call `seq` has finished: spins briefly, then sleeps
        in steps of up to 1 ms (a failed peer ends it within kolo's timeout)."""
        spins, pause = 0, 20e-6
        while not self.poll(seq):
            spins += 1
            if spins > 100:
                time.sleep(pause)
                pause = min(pause * 2, 1e-3)
