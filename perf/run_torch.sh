#!/usr/bin/env bash
# run_torch.sh [BUILD] - perf/torch_bench.py on 2 and 4 processes (mpirun):
# kolo's DistributedOptimizer against PyTorch DDP on Gloo, alternating in
# one run, step-time medians.  Builds nothing: BUILD (default build/) must
# be built; the venv is tests/torch/setup_venv.sh's.  ROUNDS, STEPS, NPS.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(tests/torch/setup_venv.sh "${1:-build}" | tail -1)
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for np in ${NPS:-2 4}; do
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" \
    "$PY" perf/torch_bench.py --rounds "${ROUNDS:-5}" --steps "${STEPS:-6}"
done
