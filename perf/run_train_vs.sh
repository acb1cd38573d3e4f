#!/usr/bin/env bash
# run_train_vs.sh [BUILD] - data-parallel training step time of kolo.torch
# beside DDP over kolo, DDP over Gloo and Horovod (perf/train_vs.py), on
# this host's CPUs, alternating the methods round by round; per model and
# process count the median step time of each method over ROUNDS launches,
# and its communication overhead: the step time minus the compute alone at
# the same batch per rank, made by as many processes at once without
# communicating (on a host with fewer cores than processes they share the
# CPUs as the training processes do; one process's step is printed too).  The overheads of kolo.torch's
# optimizer and of DDP over kolo are quoted beside the best of its peers'
# (DDP over Gloo, Horovod).
#
#   perf/run_train_vs.sh build                          # 2 and 4 processes, cnn and resnet
#   ROUNDS=3 NPS=2 MODELS=cnn perf/run_train_vs.sh build
#   HOROVOD_PY=/path/to/venv/bin/python perf/run_train_vs.sh build
#   MODELS=mlp BATCH=2 ALLREDUCE=1 perf/run_train_vs.sh build   # a wide MLP, 84 MB of gradients,
#                                       # and one all-reduce of them by each method's library
#
# Horovod runs where HOROVOD_PY names a python that imports horovod.torch
# (built from PyPI's source against Debian's torch, docs/benchmarking.md);
# without it the row says so.  Environment: ROUNDS (5), NPS ("2 4"),
# MODELS ("cnn resnet"; also mlp), STEPS (12), BATCH (8), ALLREDUCE (0; 1:
# time one all-reduce of the gradients too), OUT (a directory; default a
# temporary one).  Timings decide nothing: the script reports them.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PY=$(tests/torch/setup_venv.sh "$BUILD" | tail -1)
HPY=${HOROVOD_PY:-}
[ -n "$HPY" ] && ! "$HPY" -c 'import horovod.torch' 2>/dev/null && { echo "run_train_vs: $HPY cannot import horovod.torch" >&2; exit 1; }
OUT=${OUT:-$(mktemp -d -t kolo-train-vs.XXXXXX)}
mkdir -p "$OUT"
LOG=$OUT/launches.txt
METHODS=(kolo ddp-kolo ddp-gloo)
[ -n "$HPY" ] && METHODS+=(horovod)
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
{
  echo "# perf/run_train_vs.sh, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r)"
  echo "# kolo $(git rev-parse --short HEAD 2>/dev/null || echo '?'); torch $("$PY" -c 'import torch; print(torch.__version__)')" \
    "$([ -n "$HPY" ] && "$HPY" -c 'import horovod; print("horovod", horovod.__version__)')"
  echo "# ROUNDS=${ROUNDS:-5} NPS='${NPS:-2 4}' MODELS='${MODELS:-cnn resnet}' STEPS=${STEPS:-12} BATCH=${BATCH:-8} ALLREDUCE=${ALLREDUCE:-0}"
} | tee "$OUT/README.txt"

launch() { # np method model
  local py=$PY port
  [ "$2" = horovod ] && py=$HPY
  port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  timeout 600 "${MPI[@]}" -np "$1" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" "$py" perf/train_vs.py \
    --method "$2" --model "$3" --steps "${STEPS:-12}" --batch "${BATCH:-8}" \
    $([ "${ALLREDUCE:-0}" = 1 ] && echo --allreduce) | grep '^train_vs' >> "$LOG" ||
    { echo "run_train_vs: $2 $3 on $1 processes failed" >&2; exit 1; }
}

: > "$LOG"
for model in ${MODELS:-cnn resnet}; do
  for np in ${NPS:-2 4}; do
    for _ in $(seq "${ROUNDS:-5}"); do
      launch 1 single "$model"
      launch "$np" single "$model"
      for m in "${METHODS[@]}"; do launch "$np" "$m" "$model"; done
    done
  done
done
python3 - "$LOG" <<'EOF' | tee "$OUT/summary.txt"
import statistics, sys
runs, ars = {}, {}
for line in open(sys.argv[1]):
    tag, method, model, n, ms = line.split()
    (runs if tag == "train_vs" else ars).setdefault((model, int(n), method), []).append(float(ms))
for model, n in sorted({(k[0], k[1]) for k in runs if k[1] > 1}):
    one = statistics.median(runs[(model, 1, "single")])
    single = statistics.median(runs[(model, n, "single")])
    print("%s, %d processes (compute alone: one process %.1f ms per step, %d at once %.1f ms)" % (model, n, one, n, single))
    over = {}
    for (m2, n2, method), v in sorted(runs.items()):
        if (m2, n2) != (model, n) or method == "single":
            continue
        med = statistics.median(v)
        over[method] = med - single
        print("  %-9s step %8.1f ms  overhead %8.1f ms  (%d launches)" % (method, med, med - single, len(v)))
        if (model, n, method) in ars:
            print("  %-9s one all-reduce of the gradients %8.1f ms" % (method, statistics.median(ars[(model, n, method)])))
    peers = {k: v for k, v in over.items() if k in ("ddp-gloo", "horovod")}
    best = min(peers, key=peers.get)
    for mine in ("kolo", "ddp-kolo"):
        print("  %s's overhead / the best peer's (%s): %.2f" % (mine, best, over[mine] / peers[best]))
EOF
echo "results in $OUT"
