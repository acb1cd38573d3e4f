#!/usr/bin/env python3
"""torch_store.py PROGRAM NRANKS - kolo ranks started with torchrun's variables
while torchrun's own store (torch.distributed.TCPStore, what torchrun starts)
holds MASTER_PORT: kolo's root must take MASTER_PORT + 1, the ranks must
check their all-reduce, and the store must still answer afterwards.
Exit 77 (ctest: skipped) where python3-torch is missing."""
import datetime
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
from launch import free_port_pair  # noqa: E402  (below the ephemeral range)


def rank_env(rank, n, port):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KOLO_ROOT", "KOLO_SECRET", "OMPI_", "PMIX_", "SLURM_"))}
    env.update(RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(n),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TORCHELASTIC_RUN_ID="kolo-test-run",
               KOLO_DEBUG="INFO", KOLO_SOCKET_IFNAME="lo")
    return env


def main():
    prog, n = sys.argv[1], int(sys.argv[2])
    try:
        from torch.distributed import TCPStore
    except ImportError as e:
        print(f"SKIP: torch.distributed is not importable ({e}); Debian: python3-torch")
        return 77
    port = free_port_pair()
    store = TCPStore("127.0.0.1", port, n + 1, True, datetime.timedelta(seconds=60), wait_for_workers=False)
    store.set("before", "kolo")
    ranks = [subprocess.Popen([prog], env=rank_env(r, n, port), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(n)]
    failures = []
    for r, p in enumerate(ranks):
        out, _ = p.communicate(timeout=240)
        if p.returncode != 0 or "all-reduce checked" not in out:
            failures.append(f"rank {r} exited with {p.returncode}:\n{out}")
        if r == 0 and f"rendezvous at 127.0.0.1:{port + 1}" not in out:
            failures.append(f"rank 0 did not meet at MASTER_PORT + 1 = {port + 1}:\n{out}")
    store.set("after", "still here")
    client = TCPStore("127.0.0.1", port, n + 1, False, datetime.timedelta(seconds=10))
    if client.get("before") != b"kolo" or client.get("after") != b"still here":
        failures.append("torch's store on MASTER_PORT no longer answers as before")
    if failures:
        print("FAIL:", "\n".join(failures))
        return 1
    print(f"PASS: {n} kolo ranks met at MASTER_PORT + 1 = {port + 1} beside torch's TCPStore on {port}, "
          "all-reduce checked, the store still answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
