#!/usr/bin/env bash
# Benchmark mode on a GPU machine (the same code as manage.py benchmark): ResNet-50 224x224, bf16/fp32, batch 64/128/256,
# synthetic and LMDB data, 1 GPU and all GPUs. Prints a markdown table; ends within 8 minutes.
# Usage: bench/gpu.sh [--budget-s 420] [--json out.json]      (from any directory)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "bench/gpu.sh: no CUDA GPU is visible to PyTorch ($PY); run this on a GPU machine." >&2
    echo "(the same code runs on the CPU at a tiny size: $PY bench/gpu_trainer.py --size tiny)" >&2
    exit 2
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
# The Python side stops starting rows after --budget-s (420 s); the timeout is the backstop.
exec timeout --kill-after=10 470 "$PY" bench/gpu_trainer.py --size full "$@"
