#!/bin/bash
# A/B: DDP over kolo, sync (old) vs async (new) host all_reduce; CNN and resnet, 2 ranks pinned
cd /work/main
PY=build-net/venv-torch/bin/python
for round in 1 2 3 4 5 6 7; do
  for v in old new; do
    for model in cnn resnet; do
      mpirun --allow-run-as-root --oversubscribe --bind-to core:overload-allowed --map-by core -np 2 \
        -x PYTHONPATH=/tmp/ab/$v -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$((29700 + round)) \
        $PY perf/train_vs.py --method ddp-kolo --model $model --steps 12 --batch 8 | grep '^train_vs' | sed "s/^/$v /"
    done
  done
done
