#!/usr/bin/env bash
# The one script a device call runs (from the repo root): environment facts, the GPU tests, the benchmark.
# Logs go to $OUT (or ./gpu_out). Usage: bash bench/gpu_run.sh [quick]
set -uo pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
python3 -c 'import torch, triton, llvmlite, cuda.bindings as cb; print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, llvmlite.__version__, cb.__version__)'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
timeout 420 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_gpu.py tests/cuda/test_gpu_every_op.py tests/frontend/test_wild_cuda.py 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
python3 bench/launch_cpu.py 2>&1 | tee "$OUT/launch_cpu.log"
timeout 230 python3 bench/vs_triton.py ${1:+--quick} --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | tail -30
