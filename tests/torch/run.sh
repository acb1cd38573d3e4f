#!/usr/bin/env bash
# run.sh [BUILD] - kolo.torch's checks (run_all.sh's "PyTorch" step):
# installs kolo from BUILD (built already) and the Python package into a
# venv (setup_venv.sh), then runs, each bounded in time:
#  - check_collectives.py under mpirun with 1, 2, 3 and 4 processes, and
#    once from torchrun's variables with a real TCPStore on MASTER_PORT
#  - check_training.py: MLP and CNN with DistributedOptimizer and with DDP +
#    kolo_hook (2 ranks; MLP on 4 ranks too; fp16 compression; 2 backward
#    passes per step, also with zero_grad(set_to_none=True); DDP from
#    torchrun's variables)
#  - check_faults.py: a mismatched gradient set, a killed rank (launch.py)
#  - check_timeline.py: KOLO_TIMELINE shows buckets reduced during backward
#  - examples/torch_train.py, as README shows it; examples/horovod_train.py,
#    a script written for Horovod with only its import changed
#  - check_horovod_api.py under mpirun with 1, 2, 3 and 4 processes: cross
#    ranks, barrier, pre/postscale factors, reducescatter, grouped_allgather,
#    allgather_object, the optimizer's predivide / sparse_as_dense / bf16,
#    SyncBatchNorm against BatchNorm over the whole batch
#  - check_process_sets.py under mpirun with 1, 2, 3 and 4 processes: every
#    collective and DistributedOptimizer with process_set= a subset, a rank
#    outside a set refused, remove and add again (about 20 s in all)
#  - check_join.py under mpirun with 1, 2 and 3 processes: join() with
#    uneven steps per rank (allreduce zeros, allgather, broadcast, refusals,
#    DistributedOptimizer against one process, a mismatch failing at once)
#  - check_names.py under mpirun with 1, 2 and 3 processes: named async
#    calls made and synchronized in a different order on each rank, matched
#    by name (every dtype, against float64 / int64 references), poll, a
#    duplicate name refused, ranks blocked on unmatched names failing at
#    once naming them, a joined rank replaying named calls
#  - check_names_sets.py under mpirun with 3 processes: the same on the
#    process set of ranks 0 and 2, matched among its ranks; a name pending
#    on the set and on the global set at once (about 3 s past the import)
#  - check_elastic.py under python -m kolo.torch.elastic.launch (KOLO_TIMEOUT_MS
#    5 s): a worker of 3 killed mid-training, the 2 survivors go on from the
#    last commit (a process set of survivors carried over with its
#    DistributedOptimizer, one with the dead worker dropped); a third
#    worker added to 2 at a commit (it gets the carried set); a store
#    nobody runs fails kt.init() within 10 s (about 20 s in all)
#  - the "kolo" torch.distributed backend: check_backend.py (every call of a
#    process group) under mpirun with 1..4 processes and from torchrun's
#    variables; DDP over it, with PyTorch's allreduce and with kolo_hook
#    (check_training.py --mode ddp-backend[-hook]); examples/torch_ddp.py
# Ends with "torch: N passed, M failed"; exit 0 when none failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
PY=$(tests/torch/setup_venv.sh "${1:-build}" | tail -1) || { echo "torch: setup_venv.sh failed"; exit 1; }
LOG=$(realpath "${1:-build}")/torch-logs
rm -rf "$LOG" && mkdir -p "$LOG"
passed=0 failed=0 n=0
export KOLO_TIMEOUT_MS=${KOLO_TIMEOUT_MS:-30000}
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x KOLO_TIMEOUT_MS)

# check NAME SECONDS COMMAND...: runs it with its output in LOG/NAME.log
check() {
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  n=$((n + 1))
  timeout -k 5 "$limit" "$@" > "$LOG/$n.log" 2>&1
  rc=$?
  if [ $rc = 0 ]; then
    passed=$((passed + 1))
    echo "PASS $name ($((SECONDS - t0)) s)"
  else
    failed=$((failed + 1))
    echo "FAIL $name (exit $rc after $((SECONDS - t0)) s): $LOG/$n.log"
    grep -E "FAIL|Error|error" "$LOG/$n.log" | head -8 | sed 's/^/    /'
  fi
}
# a free port below the ephemeral range (launch.py says why)
free_port() { "$PY" -c 'import sys; sys.path.insert(0, "tests/torch"); import launch; print(launch.free_port_pair())'; }
T=tests/torch

for np in 1 2 3 4; do
  check "collectives, mpirun -np $np" 120 "${MPIRUN[@]}" -np $np "$PY" $T/check_collectives.py
done
check "collectives, torchrun's variables + TCPStore, 2 ranks" 120 "$PY" $T/launch.py -n 2 --torchrun -- "$PY" $T/check_collectives.py

export MASTER_ADDR=127.0.0.1  # gloo's store, for DDP under mpirun
for args in "--model mlp --mode opt" "--model cnn --mode opt --steps 100" "--model mlp --mode ddp" \
            "--model cnn --mode ddp --steps 100" "--model mlp --mode opt --compression fp16 --tol 1e-3" \
            "--model mlp --mode ddp --compression fp16 --tol 1e-3 --steps 100" \
            "--model mlp --mode opt --passes 2 --steps 100" "--model mlp --mode opt --passes 2 --steps 100 --set-to-none" \
            "--model cnn --mode opt --steps 30 --set-to-none"; do
  # shellcheck disable=SC2086
  check "training $args, 2 ranks" 120 "${MPIRUN[@]}" -x MASTER_ADDR -x "MASTER_PORT=$(free_port)" -np 2 "$PY" \
    $T/check_training.py $args
done
check "training --model mlp --mode opt, 4 ranks" 180 "${MPIRUN[@]}" -np 4 "$PY" $T/check_training.py --model mlp --mode opt
check "training --model mlp --mode ddp, torchrun's variables, 2 ranks" 120 "$PY" $T/launch.py -n 2 --torchrun -- \
  "$PY" $T/check_training.py --model mlp --mode ddp --steps 100

check "a rank marks other gradients: every rank fails, calls do not match" 60 "$PY" $T/launch.py -n 3 --timeout 50 -- \
  "$PY" $T/check_faults.py --case mismatch
check "a killed rank fails the others, named, within 20 s" 60 "$PY" $T/launch.py -n 3 --timeout 50 --killed 2 -- \
  "$PY" $T/check_faults.py --case kill --bound 20
mkdir -p "$LOG/timeline"
check "KOLO_TIMELINE: buckets reduced while backward runs" 60 env KOLO_TIMELINE="$LOG/timeline/tl.%r.json" \
  "${MPIRUN[@]}" -x KOLO_TIMELINE -np 2 "$PY" $T/check_timeline.py
check "examples/torch_train.py, mpirun -np 2" 60 "${MPIRUN[@]}" -np 2 "$PY" examples/torch_train.py
check "examples/horovod_train.py (Horovod's script, its import changed), mpirun -np 2" 60 "${MPIRUN[@]}" -np 2 "$PY" \
  examples/horovod_train.py --fp16-allreduce
for np in 1 2 3 4; do
  check "Horovod's further calls, mpirun -np $np" 60 "${MPIRUN[@]}" -np $np "$PY" $T/check_horovod_api.py
done
for np in 1 2 3 4; do
  check "process sets, mpirun -np $np" 60 "${MPIRUN[@]}" -np $np "$PY" $T/check_process_sets.py
done
for np in 1 2 3; do
  check "join with uneven steps, mpirun -np $np" 60 "${MPIRUN[@]}" -np $np "$PY" $T/check_join.py
done
for np in 1 2 3; do
  check "name=: calls matched by name in any order, mpirun -np $np" 60 "${MPIRUN[@]}" -np $np "$PY" $T/check_names.py
done
check "name= on a process set of ranks 0 and 2 of 3, mpirun -np 3" 60 "${MPIRUN[@]}" -np 3 "$PY" \
  $T/check_names_sets.py

ELASTIC=("$PY" -m kolo.torch.elastic.launch --timeout 50)
check "elastic: a killed worker, the survivors go on from the last commit" 60 env KOLO_TIMEOUT_MS=5000 \
  "${ELASTIC[@]}" -n 3 --killed 1 -- "$PY" $T/check_elastic.py --case kill
check "elastic: a worker added at a commit" 60 env KOLO_TIMEOUT_MS=5000 "${ELASTIC[@]}" -n 2 --add-after 2 -- \
  "$PY" $T/check_elastic.py --case add
check "elastic: no rendezvous store, kt.init() fails within 10 s" 30 "$PY" $T/check_elastic.py --case unreachable

# backend="kolo": RANK / WORLD_SIZE from Open MPI's variables, the store on MASTER_PORT
for np in 1 2 3 4; do
  check "backend kolo: every call, mpirun -np $np" 90 "${MPIRUN[@]}" -x MASTER_ADDR -x "MASTER_PORT=$(free_port)" \
    -np $np "$PY" $T/check_backend.py
done
check "backend kolo: every call, torchrun's variables, 2 ranks" 60 "$PY" $T/launch.py -n 2 --torchrun -- \
  "$PY" $T/check_backend.py
for args in "--model mlp --mode ddp-backend" "--model mlp --mode ddp-backend-hook" \
            "--model cnn --mode ddp-backend --steps 100" "--model cnn --mode ddp-backend-hook --steps 100"; do
  # shellcheck disable=SC2086
  check "training $args, 2 ranks" 60 "${MPIRUN[@]}" -x MASTER_ADDR -x "MASTER_PORT=$(free_port)" -np 2 "$PY" \
    $T/check_training.py $args
done
check "training --model mlp --mode ddp-backend, 3 ranks" 90 "${MPIRUN[@]}" -x MASTER_ADDR -x "MASTER_PORT=$(free_port)" \
  -np 3 "$PY" $T/check_training.py --model mlp --mode ddp-backend --steps 100
check "examples/torch_ddp.py, torchrun's variables, 2 ranks" 60 "$PY" $T/launch.py -n 2 --torchrun -- \
  "$PY" examples/torch_ddp.py

echo "torch: $passed passed, $failed failed"
[ $failed = 0 ]
