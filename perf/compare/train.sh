# perf/compare/train.sh - perf/compare.sh train: the data-parallel training
# step of kolo.torch beside DDP over kolo, DDP over Gloo and Horovod
# (perf/train_vs.py) on this host's CPUs, the methods in turn round by round:
# each one's median step time and its overhead over the compute alone (as
# many processes at once, not communicating).  Settings: docs/benchmarking.md.

# train_run METHOD ROUND: one launch of METHOD (single1: one process
# without communicating; single: NP of them) on MODEL.
train_run() {
  local np=$NP method=$1 py=$PY port
  [ "$method" = single1 ] && np=1 method=single
  [ "$method" = horovod ] && py=$HPY
  port=$("$PY" -c 'import sys; sys.path.insert(0, "tests/torch"); import launch; print(launch.free_port_pair())')
  timeout 600 "${MPIRUN[@]}" -np "$np" -x MASTER_ADDR=127.0.0.1 \
    -x MASTER_PORT="$port" "$py" perf/train_vs.py --method "$method" --model "$MODEL" --steps "${STEPS:-12}" \
    --batch "${BATCH:-8}" $([ "${ALLREDUCE:-0}" = 1 ] && echo --allreduce) | grep '^train_vs' >> "$OUT/launches.txt" ||
    die "$method $MODEL on $np processes failed"
}

mode_train() {
  ! bind_core || MPIRUN=("${MPIRUN_CORE[@]}")
  PY=$(tests/torch/setup_venv.sh "$BUILD" | tail -1)
  HPY=${HOROVOD_PY:-}
  [ -z "$HPY" ] || "$HPY" -c 'import horovod.torch' 2> /dev/null || die "$HPY cannot import horovod.torch"
  local methods=(single1 single kolo ddp-kolo ddp-gloo)
  local about=("# torch $("$PY" -c 'import torch; print(torch.__version__)')")
  [ -z "$HPY" ] || methods+=(horovod) about+=("$("$HPY" -c 'import horovod; print("# horovod", horovod.__version__)')")
  header "${about[@]}" "# REPEATS=${REPEATS:-5} NPROCS='${NPROCS:-2 4}' MODELS='${MODELS:-cnn resnet}' STEPS=${STEPS:-12} BATCH=${BATCH:-8} ALLREDUCE=${ALLREDUCE:-0} BIND=${BIND:-none} BUSY=$BUSY"
  : > "$OUT/launches.txt"
  start_busy "$BUSY"
  for MODEL in ${MODELS:-cnn resnet}; do
    for NP in ${NPROCS:-2 4}; do alternate "${REPEATS:-5}" train_run "${methods[@]}"; done
  done
  stop_busy
  python3 - "$OUT/launches.txt" << 'PY' | tee "$OUT/summary.txt"
from statistics import median
import sys
runs, ars = {}, {}
for line in open(sys.argv[1]):
    tag, method, model, n, ms = line.split()
    (runs if tag == "train_vs" else ars).setdefault((model, int(n), method), []).append(float(ms))
for model, n in sorted({(k[0], k[1]) for k in runs if k[1] > 1}):
    one, single = (median(runs[(model, k, "single")]) for k in (1, n))
    print("%s, %d processes (compute alone: one process %.1f ms per step, %d at once %.1f ms)" % (model, n, one, n, single))
    over = {}
    for method, v in sorted((k[2], v) for k, v in runs.items() if k[:2] == (model, n) and k[2] != "single"):
        over[method] = median(v) - single
        print("  %-9s step %8.1f ms  overhead %8.1f ms  (%d launches)" % (method, median(v), over[method], len(v)))
        if (model, n, method) in ars:
            print("  %-9s one all-reduce of the gradients %8.1f ms" % (method, median(ars[(model, n, method)])))
    best = min((k for k in over if k in ("ddp-gloo", "horovod")), key=over.get)
    for mine in ("kolo", "ddp-kolo"):
        print("  %s's overhead / the best peer's (%s): %.2f" % (mine, best, over[mine] / over[best]))
PY
}
