"""Starts N ranks of a command without mpirun, as kolo's other launchers
would: with KOLO_ROOT / KOLO_RANK / KOLO_WORLD_SIZE / KOLO_SECRET, or
(--torchrun) with torchrun's variables and, like torchrun's agent, a real
torch.distributed.TCPStore listening on MASTER_PORT (kolo's root then takes
MASTER_PORT + 1).  Prints each rank's output prefixed by its rank, ends the
job after --timeout seconds, and exits 0 when every rank exited 0 (a rank
named by --killed must have died of a signal instead).

  launch.py -n N [--torchrun] [--timeout S] [--killed R] -- command ...
"""
import argparse
import os
import random
import secrets
import socket
import subprocess
import sys
import threading
import time


def free_port_pair():
    """A port p with p + 1 free too (torchrun's store and kolo's root),
    below the kernel's ephemeral range: a port from bind(0) is in that
    range, where any process's outgoing connection may take it before the
    store listens (seen in CI as "Address already in use")."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10000, max(10002, low - 1))
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("launch.py: no two free ports in a row")


def rank_env(args, rank, port):
    env = dict(os.environ)
    if args.torchrun:
        env.update(RANK=str(rank), WORLD_SIZE=str(args.n), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(args.n),
                   GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="0",
                   TORCHELASTIC_MAX_RESTARTS="0", TORCHELASTIC_RUN_ID="kolo-test", KOLO_SECRET=args.secret)
    else:
        env.update(KOLO_ROOT="127.0.0.1:%d" % port, KOLO_RANK=str(rank), KOLO_WORLD_SIZE=str(args.n),
                   KOLO_SECRET=args.secret)
    return env


def pump(rank, stream):
    for line in stream:
        sys.stdout.write("[%d] %s" % (rank, line))
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("--torchrun", action="store_true")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--killed", type=int, action="append", default=[])
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    args.secret = secrets.token_hex(16)
    port = free_port_pair()
    store = None
    if args.torchrun:  # torchrun's agent holds MASTER_PORT with its own store
        import datetime

        import torch.distributed as dist

        store = dist.TCPStore("127.0.0.1", port, args.n, True, datetime.timedelta(seconds=args.timeout),
                              wait_for_workers=False)
    procs, pumps = [], []
    for rank in range(args.n):
        p = subprocess.Popen(command, env=rank_env(args, rank, port), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        procs.append(p)
        pumps.append(threading.Thread(target=pump, args=(rank, p.stdout), daemon=True))
        pumps[-1].start()
    deadline = time.monotonic() + args.timeout
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    bad = 0
    for rank, p in enumerate(procs):
        if p.poll() is None:
            p.kill()
            p.wait()
            print("launch.py: rank %d still ran after %g s: killed" % (rank, args.timeout))
            bad = 1
        elif rank in args.killed:
            bad |= p.returncode >= 0
        else:
            bad |= p.returncode != 0
        if p.returncode != 0:
            print("launch.py: rank %d exited %d" % (rank, p.returncode))
    for t in pumps:
        t.join(timeout=5)
    del store
    return bad


if __name__ == "__main__":
    sys.exit(main())
