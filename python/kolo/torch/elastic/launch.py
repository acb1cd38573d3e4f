"""Starts an elastic kolo.torch job on this host:

    python -m kolo.torch.elastic.launch -n 3 [--port P] [--timeout S] [--add-after S]... -- python train.py

It runs the job's rendezvous store (a torch.distributed.TCPStore on
127.0.0.1:P, or --host), starts N workers with KOLO_ELASTIC_STORE and
KOLO_ELASTIC_ID (0, 1, ...), and drives the generations: a new one (its
members: the workers still running, and those started later that wait to
join) whenever a member exits before any has finished, a worker asks for
one after a failure, or a worker started later is ready.  --add-after S
starts one more worker S seconds after the start (a test hook;
Launcher.add_worker() from Python).  Exits 0 when every worker exited 0
(those named by --killed may instead die of a signal); after --timeout
seconds it kills what still runs.

What it does not do: start workers on other hosts, discover hosts
(horovodrun's --host-discovery-script), restart a failed worker, or limit
the number of resets.  The store has no authentication: anyone who reaches
its port can read the job's kolo unique ids.
"""
import argparse
import datetime
import os
import random
import socket
import subprocess
import sys
import threading
import time

from kolo.torch.elastic._rendezvous import PREFIX


def free_port():
    """A free port below the kernel's ephemeral range (where an outgoing
    connection could take it before the store listens)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        port = random.randrange(10000, max(10001, low - 1))
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
    raise RuntimeError("kolo.torch.elastic.launch: no free port")


class Launcher:
    def __init__(self, command, n, host="127.0.0.1", port=None, timeout=600.0):
        import torch.distributed as dist

        self.command, self.host, self.port = command, host, port or free_port()
        self.store = dist.TCPStore(host, self.port, None, True, datetime.timedelta(seconds=timeout),
                                   wait_for_workers=False)
        self.procs, self.pending, self.pumps = {}, [], []
        self.gen, self.members = -1, []
        self._publish(list(range(n)))
        for w in range(n):
            self._start(w)

    def _publish(self, members):
        self.gen, self.members = self.gen + 1, members
        self.store.set(PREFIX + "members/%d" % self.gen, ",".join(str(w) for w in members))
        self.store.set(PREFIX + "gen", str(self.gen))
        if self.gen:
            print("kolo.torch.elastic.launch: generation %d: workers %s" % (self.gen, members), flush=True)

    def _start(self, w):
        env = dict(os.environ, KOLO_ELASTIC_STORE="%s:%d" % (self.host, self.port), KOLO_ELASTIC_ID=str(w))
        p = subprocess.Popen(self.command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs[w] = p
        self.pumps.append(threading.Thread(target=_pump, args=(w, p.stdout), daemon=True))
        self.pumps[-1].start()

    def add_worker(self):
        """Starts one more worker; it joins the job at the running workers' next commit."""
        w = len(self.procs)
        self.pending.append(w)
        self._start(w)
        return w

    def _count(self, key):
        return self.store.add(PREFIX + key, 0)

    def step(self):
        """One round of the driver: publishes a new generation if one is due."""
        running = [w for w in self.members if self.procs[w].poll() is None]
        finished = any(self.procs[w].poll() == 0 for w in self.members)
        self.pending = [w for w in self.pending if self.procs[w].poll() is None]
        ready = [w for w in self.pending if self._count("ready/%d" % w) > 0]
        if finished or not running:
            return
        if ready or len(running) < len(self.members) or self._count("reset/%d" % self.gen) > 0:
            self.pending = [w for w in self.pending if w not in ready]
            self._publish(sorted(running + ready))

    def wait(self, timeout, add_after=()):
        """Drives the job until every worker exited (or timeout s); the exit codes by worker."""
        t0 = time.monotonic()
        adds = sorted(add_after)
        while any(p.poll() is None for w, p in self.procs.items() if w not in self.pending) and \
                time.monotonic() - t0 < timeout:
            while adds and time.monotonic() - t0 >= adds[0]:
                adds.pop(0)
                self.add_worker()
            self.step()
            time.sleep(0.05)
        for w, p in self.procs.items():
            if p.poll() is None:
                p.kill()
                p.wait()
                print("kolo.torch.elastic.launch: worker %d still ran: killed" % w, flush=True)
        for t in self.pumps:
            t.join(timeout=5)
        return {w: p.returncode for w, p in self.procs.items()}


def _pump(w, stream):
    for line in stream:
        sys.stdout.write("[%d] %s" % (w, line))
        sys.stdout.flush()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kolo.torch.elastic.launch")
    ap.add_argument("-n", type=int, required=True, help="workers at the start")
    ap.add_argument("--host", default="127.0.0.1", help="the address the store listens on and workers reach")
    ap.add_argument("--port", type=int, default=0, help="the store's port (default: a free one)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before what still runs is killed")
    ap.add_argument("--add-after", type=float, action="append", default=[], help="start one more worker then")
    ap.add_argument("--killed", type=int, action="append", default=[], help="a worker that may die of a signal")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    launcher = Launcher(command, args.n, args.host, args.port or None, args.timeout)
    codes = launcher.wait(args.timeout, args.add_after)
    bad = 0
    for w, code in sorted(codes.items()):
        if code != 0:
            print("kolo.torch.elastic.launch: worker %d exited %d" % (w, code), flush=True)
        bad |= (code >= 0) if w in args.killed else (code != 0)
    return bad


if __name__ == "__main__":
    sys.exit(main())
