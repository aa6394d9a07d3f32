#!/usr/bin/env bash
# The one script a device call runs (from the repo root): environment facts, then the GPU tests and/or the
# benchmark side by side with Triton. Logs go to $OUT (or ./gpu_out).
# Usage: bash bench/gpu_run.sh [all|tests|bench|tune|first|wgmma|attention|hopper|inductor|speed|recheck|...] [quick]   (one stage per call keeps a call under 10 minutes)
set -uo pipefail
stage=${1:-all}; quick=${2:-}
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
python3 -c 'import torch, triton, llvmlite, cuda.bindings as cb; print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, llvmlite.__version__, cb.__version__)'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
# a `tilec` command for the steps that run it (zero_jit's pull), as an installed package would have
# tutorial 03's configs under TV_VARIANTS (bench/t03_variants.py, with TV_CONFIGS and TV_SIZES; carry .wt/tutorials),
# where TV_VARIANTS is set: the stages that time a codegen change end with it
tv_variants() {
  [ -n "${TV_VARIANTS:-}" ] || return 0
  timeout 200 python3 bench/t03_variants.py .wt/tutorials/03-matrix-multiplication.py --variants "$TV_VARIANTS" \
    ${TV_CONFIGS:+--configs "$TV_CONFIGS"} ${TV_SIZES:+--sizes "$TV_SIZES"} 2>&1 | grep -v -i warn | tee "$OUT/t03_variants.log"
}
tilec_command() { mkdir -p /tmp/bin && printf '#!/bin/sh\nexec python3 -m tilec "$@"\n' > /tmp/bin/tilec && chmod +x /tmp/bin/tilec; }
if [ "$stage" = all ] || [ "$stage" = tests ]; then
  timeout 420 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore \
    tests/cuda/test_gpu.py tests/cuda/test_gpu_every_op.py tests/frontend/test_wild_cuda.py tests/cuda/test_sandbox_cuda.py 2>&1 \
    | tee "$OUT/gpu_tests.log" | tail -40
  python3 bench/launch_cpu.py 2>&1 | tee "$OUT/launch_cpu.log"
fi
if [ "$stage" = all ] || [ "$stage" = bench ]; then
  timeout 400 python3 bench/vs_triton.py ${quick:+--quick} --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | tail -30
fi
if [ "$stage" = wgmma ]; then
  # the Hopper matmul ladder: tutorial matmul on Triton, tilec sm_90 (mma.sync) and sm_90a (wgmma); correctness first
  timeout 300 python3 bench/wgmma_matmul.py ${quick:+--quick} --json "$OUT/wgmma.json" --dump "$OUT" 2>&1 | tee "$OUT/wgmma.log" | tail -40
  # the GPU tests of dots and matmuls, which on sm_90 now take wgmma
  timeout 180 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_gpu.py \
    -k "matmul or dot or mma" 2>&1 | tee "$OUT/gpu_dot_tests.log" | tail -15
fi
if [ "$stage" = attention ]; then
  # flash-attention forward (tests/kernels/attention.py): tilec cuda:sm_90 (both dots on wgmma) against torch's
  # SDPA, then side by side with Triton on the same source; the GPU tests of dots after it
  timeout 420 python3 bench/attention.py ${quick:+--quick} --json "$OUT/attention.json" 2>&1 | tee "$OUT/attention.log" | tail -60
  timeout 150 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_gpu.py \
    -k "matmul or dot or mma" 2>&1 | tee "$OUT/gpu_dot_tests.log" | tail -15
fi
if [ "$stage" = hopper ]; then
  # everything issue 11 names, on one build: the GPU tests of dots (every input type, TMA, sm_80 from PTX),
  # scans and the tutorial kernels, then the matmul ladder's figures (pointer, descriptor/TMA, persistent)
  # and attention, each side by side with Triton in this run
  timeout 180 python3 -m pytest -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_gpu.py \
    tests/cuda/test_gpu_dot_types.py tests/cuda/test_tma.py tests/cuda/test_scan_parallel.py tests/cuda/test_attention.py \
    2>&1 | tee "$OUT/hopper_tests.log" | tail -15
  timeout 150 python3 bench/attention.py --json "$OUT/attention.json" 2>&1 | tee "$OUT/attention.log" | tail -8
  timeout 120 python3 bench/wgmma_matmul.py ${quick:+--quick} --json "$OUT/wgmma.json" 2>&1 | tee "$OUT/wgmma.log" | tail -6
  timeout 75 python3 bench/tma_matmul.py --json "$OUT/tma.json" 2>&1 | tee "$OUT/tma.log" | tail -4
  timeout 60 python3 bench/persistent_matmul.py --json "$OUT/persistent.json" 2>&1 | tail -3  # 8 files come back at most
fi
if [ "$stage" = tune ]; then
  timeout 500 python3 bench/tune.py --strategy "${quick:-halving}" --json "$OUT/tune.json" 2>&1 | tee "$OUT/tune.log" | tail -40
fi
if [ "$stage" = first ]; then
  # the client path's GPU tests first (the ctypes driver, a refused cubin rebuilt from PTX), then the bench
  timeout 240 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore \
    tests/client/test_arch_mismatch.py tests/e2e/test_client_path_gpu.py tests/cuda/test_launch_path.py tests/cuda/test_gpu.py 2>&1 \
    | tee "$OUT/client_gpu_tests.log" | tail -15
  # as an installed package would be: byte-compiled (the wheels above are installed with --no-compile)
  python3 -m compileall -q -j 0 /tmp/site tilec compiler runtime client server migrations > /dev/null 2>&1
  timeout 500 python3 bench/first_launch.py --json "$OUT/first_launch.json" 2>&1 | tee "$OUT/first_launch.log" | tail -20
fi
if [ "$stage" = inductor ]; then
  # the max-autotune models of the Inductor corpus (merged into the committed corpus), then tilec under
  # torch.compile: every model against Inductor's outputs, and one model's cold start side by side
  [ -n "$quick" ] || TORCHINDUCTOR_COMPILE_THREADS=16 timeout 75 python3 tests/inductor/make_corpus.py \
    --merge tests/inductor/corpus --only attention mm mlp_gelu --tar "$OUT/corpus.tar.gz" 2>&1 \
    | grep -v -i warn | tee "$OUT/corpus.log" | grep -E "^[a-z_]+ +[0-9.]+ s|models|FAILED"
  timeout 480 python3 bench/inductor_cold.py --runs 1 --budget-s 380 --json "$OUT/inductor.json" 2>&1 | tee "$OUT/inductor.log" \
    | grep -v -i warn | tail -60
fi
if [ "$stage" = speed ]; then
  # issue 24's table: tutorial-style kernels, the project's own, launch overhead (plain, autotuned, Inductor)
  # and torch.compile models per call, Triton/Inductor and tilec side by side (bench/speed.py); then the GPU
  # tests of warm launches, of division against Triton's bits, and of tl.sort / tl.gather against torch
  timeout 450 python3 bench/speed.py ${quick:+--quick} --budget-s 330 --json "$OUT/speed.json" --dump "$OUT/speed_ptx.json" --profile 2>&1 | tee "$OUT/speed.log" \
    | grep -v -i warn | tail -45
  timeout 120 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore \
    tests/cuda/test_launch_gpu.py tests/cuda/test_division_gpu.py tests/cuda/test_sort_gather.py 2>&1 | tee "$OUT/speed_tests.log" | tail -8
fi
if [ "$stage" = recheck ]; then
  # after changes to the cuda lowering made without a GPU (bench/NOTES-cuda.md, the fourth session): every
  # test under tests/cuda on the GPU first (the changed paths' own GPU tests and every other kernel), then
  # FlagGems' ops side by side when .wt/flaggems is carried, then the speed table in the time left
  t0=$(date +%s); left() { echo $(( ${RECHECK_BUDGET:-540} - ($(date +%s) - t0) )); }
  timeout 300 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda \
    tests/frontend/test_wild_cuda.py 2>&1 | tee "$OUT/recheck_tests.log" | tail -25
  if [ -d .wt/flaggems/src ]; then
    PYTHONPATH=$PWD/.wt/flaggems/src:$PYTHONPATH timeout 120 python3 bench/flaggems_ops.py 2>&1 | grep -v -i warn \
      | tee "$OUT/flaggems_ops.log" | tail -22
  fi
  [ "$(left)" -gt 90 ] && timeout "$(left)" python3 bench/speed.py --budget-s $(( $(left) - 40 )) --json "$OUT/speed.json" 2>&1 \
    | grep -v -i warn | tee "$OUT/speed.log" | tail -40
fi
if [ "$stage" = ncu_bmm ]; then
  # issue 24's batched matmul under Nsight Compute: one launch of each side at Triton's config (bench/bmm_probe.py
  # --once), where its issue slots and stalls go; then the one-GPU child's tests with every GPU visible (the
  # 2 GiB launch that failed on a 4-GPU host before the child saw its own GPU alone)
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  timeout 300 "$NCU" --kernel-name regex:bmm_kernel --section SpeedOfLight --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy \
    python3 bench/bmm_probe.py --once --variant "${BMM_VARIANT:-as written}" --dump "$OUT/bmm_asm" > "$OUT/ncu_bmm.log" 2>&1
  echo "ncu exit $?"; grep -v -i warn "$OUT/ncu_bmm.log" | tail -120
  timeout 120 python3 bench/bmm_probe.py --dump "$OUT/bmm_asm" 2>&1 | grep -v -i warn | tee "$OUT/bmm_probe.log"
  (unset CUDA_VISIBLE_DEVICES; timeout 200 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore \
    tests/cuda/test_sandbox_cuda.py tests/cuda/test_bench_keep.py 2>&1 | tee "$OUT/one_gpu_tests.log" | tail -8)
fi
if [ "$stage" = tutorials_only ]; then
  # Triton's tutorials as published, timed by their own benchmarks, sides alternating (carry .wt/tutorials)
  timeout "${TT_TIMEOUT:-400}" python3 bench/tutorial_timings.py .wt/tutorials --only "${TUTORIALS:-01,02,03,05}" \
    --rounds "${TT_ROUNDS:-03=3}" --timeout "${TT_EACH:-120}" --json "$OUT/tutorial_timings.json" 2>&1 | grep -v -i warn \
    | tee "$OUT/tutorial_timings.log" | tail -70
fi
if [ "$stage" = first_point ]; then
  # the tutorials' first readings (carry .wt/tutorials): GPU tests named in FP_TESTS first, then each benchmark's
  # first x value timed FP_FIRST times and the next few once, with each reading's spread (do_bench's times, the
  # host time of the calls it timed, the collector's passes)
  if [ -n "${FP_TESTS:-}" ]; then
    timeout "${FP_TESTS_S:-240}" python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore $FP_TESTS \
      2>&1 | tee "$OUT/fp_tests.log" | tail -15
  fi
  timeout "${TT_TIMEOUT:-300}" python3 bench/tutorial_timings.py .wt/tutorials --only "${TUTORIALS:-01,02,05}" \
    --rounds "${TT_ROUNDS:-}" --timeout "${TT_EACH:-90}" --first "${FP_FIRST:-3}" --points "${FP_POINTS:-5}" --dist \
    2>&1 | grep -v -i warn | tee "$OUT/first_point.log" | tail -80
fi
if [ "$stage" = carried ]; then
  # loop-carried address tiles (axis analysis through loops, carried in their loads' layout), fp8 conversions in
  # hardware and B^T staging on mma.sync: the GPU tests of every path they touch, then tutorial 03's configs at
  # fp16 and fp8 points, each alone under both (carry .wt/tutorials)
  # (CA_LIST replaces the list of test files)
  timeout "${CA_TESTS_S:-330}" python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore \
    ${CA_LIST:-tests/cuda/test_gpu.py tests/cuda/test_gpu_every_op.py tests/cuda/test_gpu_dot_types.py tests/cuda/test_pipeline.py \
    tests/cuda/test_mma.py tests/cuda/test_wgmma.py tests/cuda/test_attention.py tests/cuda/test_trans_load.py \
    tests/cuda/test_prefetch.py} ${CA_TESTS:-} 2>&1 | tee "$OUT/carried_tests.log" | tail -12
  timeout "${CA_T03_S:-200}" python3 bench/tutorial03_configs.py .wt/tutorials --points "${CA_POINTS:-fp16:1280,fp8:768,fp8:1280}" \
    2>&1 | grep -v -i warn | tee "$OUT/tutorial03_configs.log" | tail -60
fi
if [ "$stage" = speed_fp8 ]; then
  # the speed table with its fp8 rows after the carried-address and fp8 changes: the fp8 dot GPU tests first (sm_89's
  # mma.sync with hardware conversions), then the table, then FlagGems' ops in CUDA graphs (carry .wt/flaggems) in the
  # time left
  t0=$(date +%s); left() { echo $(( ${SF_BUDGET:-570} - ($(date +%s) - t0) )); }
  timeout 120 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_gpu_dot_types.py \
    -k fp8 ${SF_TESTS:-} 2>&1 | tee "$OUT/tests.log" | tail -6
  timeout "$(left)" python3 bench/speed.py --budget-s $(( $(left) - ${SF_AFTER:-130} )) ${SF_ONLY:+--only "$SF_ONLY"} \
    --json "$OUT/speed.json" 2>&1 | grep -v -i warn | tee "$OUT/speed.log" | tail -40
  if [ -d .wt/flaggems/src ] && [ "$(left)" -gt 60 ]; then
    PYTHONPATH=$PWD/.wt/flaggems/src:$PYTHONPATH timeout "$(left)" python3 bench/flaggems_ops.py --graph --timeout 80 2>&1 \
      | grep -v -i warn | tee "$OUT/flaggems_ops_graph.log" | tail -22
  fi
fi
if [ "$stage" = reduce ]; then
  # reductions in Triton's order (session 12): the order each side's 1-D sum rounds in, the GPU tests of
  # reductions (Triton's bits, the interpreter's answers, attention's row sums), then FlagGems' reduction ops in
  # CUDA graphs (carry .wt/flaggems) in the time left
  t0=$(date +%s); left() { echo $(( ${RD_BUDGET:-560} - ($(date +%s) - t0) )); }
  timeout 60 python3 bench/reduce_order.py 2>&1 | grep -v -i warn | tee "$OUT/reduce_order.log"
  timeout 300 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_reduce_bits_gpu.py \
    tests/cuda/test_arg_reduce.py tests/cuda/test_gpu_every_op.py tests/cuda/test_attention.py ${RD_TESTS:-} 2>&1 \
    | tee "$OUT/reduce_tests.log" | tail -25
  if [ -d .wt/flaggems/src ] && [ "$(left)" -gt 60 ]; then
    PYTHONPATH=$PWD/.wt/flaggems/src:$PYTHONPATH timeout "$(left)" python3 bench/flaggems_ops.py --graph --timeout 80 \
      --only "${RD_OPS:-argmax,softmax,sum_dim,log_softmax,amax,mean_all,layer_norm,cross_entropy}" 2>&1 \
      | grep -v -i warn | tee "$OUT/flaggems_ops_graph.log" | tail -14
  fi
fi
if [ "$stage" = argmax_variants ]; then
  # FlagGems' argmax kernel under codegen variants against Triton (carry .wt/flaggems), then the reduce stage's tests
  timeout 200 python3 bench/argmax_variants.py --variants "${AV_VARIANTS:-argmax_passes=2}" 2>&1 | grep -v -i warn \
    | tee "$OUT/argmax_variants.log"
  timeout 300 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_reduce_bits_gpu.py \
    tests/cuda/test_arg_reduce.py ${AV_TESTS:-} 2>&1 | tee "$OUT/reduce_tests.log" | tail -8
fi
if [ "$stage" = speed_rows ]; then
  # FlagGems' ops in CUDA graphs (carry .wt/flaggems), then the speed-table rows whose names contain SR_ONLY's
  # substrings (';' between), each SR_ROUNDS times: a row that moved, read again in one call
  if [ -d .wt/flaggems/src ]; then
    PYTHONPATH=$PWD/.wt/flaggems/src:$PYTHONPATH timeout 170 python3 bench/flaggems_ops.py --graph --timeout 80 2>&1 \
      | grep -v -i warn | tee "$OUT/flaggems_ops_graph.log" | tail -20
  fi
  IFS=';' read -ra rows <<< "${SR_ONLY:-quantization}"
  for round in $(seq "${SR_ROUNDS:-2}"); do
    for row in "${rows[@]}"; do
      timeout 120 python3 bench/speed.py --only "$row" --budget-s 90 2>&1 | grep -v -i warn | grep -E "^(kernel|[a-z].* [0-9]\.[0-9]{4} )" \
        | tee -a "$OUT/speed_rows.log"
    done
  done
fi
if [ "$stage" = coords ]; then
  # after a change to the lowering's thread coordinates (every kernel's addresses): the GPU tests of every op,
  # dot, pipeline, reduction and scan; tutorial 03's configs under codegen variants (TV_*; carry .wt/tutorials);
  # FlagGems' ops in CUDA graphs on this tree and on .wt/old (an earlier tree, `git archive`; carry .wt) side by
  # side (CD_TREES=. for this tree alone); then the speed table in the time left
  t0=$(date +%s); left() { echo $(( ${CD_BUDGET:-570} - ($(date +%s) - t0) )); }
  timeout "${CD_TESTS_S:-230}" python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_gpu.py \
    tests/cuda/test_gpu_every_op.py tests/cuda/test_attention.py tests/cuda/test_wgmma.py tests/cuda/test_pipeline.py \
    tests/cuda/test_mma.py tests/cuda/test_scan_parallel.py tests/cuda/test_sort_gather.py tests/cuda/test_reduce_bits_gpu.py \
    tests/cuda/test_tma.py tests/cuda/test_gpu_dot_types.py ${CD_TESTS:-} 2>&1 | tee "$OUT/tests.log" | tail -8
  tv_variants
  for tree in ${CD_TREES:-. .wt/old}; do
    [ -d "$tree/compiler" ] && [ -d .wt/flaggems/src ] && [ "$(left)" -gt 60 ] && (cd "$tree" && \
      TILEC_CACHE_DIR=$(mktemp -d) PYTHONPATH=$PWD:$OLDPWD/.wt/flaggems/src:${PYTHONPATH#$OLDPWD:} timeout "$(( $(left) < 150 ? $(left) : 150 ))" \
      python3 bench/flaggems_ops.py --graph --timeout 70 ${CD_OPS:+--only "$CD_OPS"} 2>&1 | grep -v -i warn \
      | tee "$OUT/flaggems_ops_graph_$([ "$tree" = . ] && echo new || echo old).log" | tail -20)
  done
  [ "$(left)" -gt 100 ] && timeout "$(left)" python3 bench/speed.py --budget-s $(( $(left) - 40 )) ${CD_SPEED_ONLY:+--only "$CD_SPEED_ONLY"} \
    --json "$OUT/speed.json" 2>&1 | grep -v -i warn | tee "$OUT/speed.log" | tail -34
fi
if [ "$stage" = trees ]; then
  # a codegen default changed: GPU tests (TR_TESTS, pytest arguments), then the speed-table rows whose names hold
  # TR_ONLY (default matmul) on this tree and on .wt/old (the tree before, `git archive`; carry .wt),
  # TR_ROUNDS times in turn, each with a cache of its own; then tutorial 03's configs under TV_VARIANTS
  [ -n "${TR_TESTS:-}" ] && timeout 200 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore $TR_TESTS 2>&1 \
    | tee "$OUT/tests.log" | tail -4
  for round in $(seq "${TR_ROUNDS:-1}"); do
    for tree in . .wt/old; do
      (cd "$tree" && TILEC_CACHE_DIR=$(mktemp -d) PYTHONPATH=$PWD:${PYTHONPATH#$OLDPWD:} timeout 150 python3 bench/speed.py \
        --only "${TR_ONLY:-matmul}" --budget-s 120 2>&1 | grep -v -i warn | grep -E "^(kernel|[a-z].* [0-9]\.[0-9]{4} )" \
        | sed "s/^/$([ "$tree" = . ] && echo new || echo old) /" | tee -a "$OUT/trees.log")
    done
  done
  tv_variants
fi
if [ "$stage" = bmm_variants ]; then
  # FlagGems' bmm kernel at each config of its tuning list, Triton against tilec's codegen variants
  # (bench/bmm_variants.py, BV_VARIANTS; carry .wt/flaggems), then tutorial 03's configs under TV_VARIANTS
  timeout 240 python3 bench/bmm_variants.py ${BV_VARIANTS:+--variants "$BV_VARIANTS"} 2>&1 | grep -v -i warn | tee "$OUT/bmm_variants.log"
  tv_variants
fi
if [ "$stage" = t03_variants ]; then
  # tutorial 03's kernel at fixed configs, Triton against tilec's codegen variants (bench/t03_variants.py; carry
  # .wt/tutorials), then with SPEED=1 the speed table in the time left
  t0=$(date +%s); left() { echo $(( ${TV_BUDGET:-540} - ($(date +%s) - t0) )); }
  timeout 300 python3 bench/t03_variants.py .wt/tutorials/03-matrix-multiplication.py ${TV_VARIANTS:+--variants "$TV_VARIANTS"} \
    ${TV_CONFIGS:+--configs "$TV_CONFIGS"} ${TV_SIZES:+--sizes "$TV_SIZES"} 2>&1 \
    | grep -v -i warn | tee "$OUT/t03_variants.log"
  if [ "${SPEED:-}" = 1 ] && [ "$(left)" -gt 120 ]; then
    timeout "$(left)" python3 bench/speed.py --budget-s $(( $(left) - 40 )) ${SPEED_ONLY:+--only "$SPEED_ONLY"} --json "$OUT/speed.json" 2>&1 \
      | grep -v -i warn | tee "$OUT/speed.log" | tail -34
  fi
fi
if [ "$stage" = swizzle ]; then
  # mma.sync's swizzled ring tiles: the GPU tests of every dot and pipeline path, then tutorial 03's two-warp
  # configs (mma.sync on both sides) against the padded rows (mma_ring_swizzle=0), and tilec's mma.sync builds of
  # four- and eight-warp configs (sm90a_for_dots=0: what sm_80 runs; Triton's are wgmma there, so that ratio is
  # not like for like) beside its wgmma build (carry .wt/tutorials)
  timeout "${SW_TESTS_S:-260}" python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore \
    ${SW_LIST:-tests/cuda/test_pipeline.py tests/cuda/test_mma.py tests/cuda/test_gpu_dot_types.py tests/cuda/test_tma.py} \
    ${SW_TESTS:-} 2>&1 | tee "$OUT/swizzle_tests.log" | tail -12
  timeout 200 python3 bench/t03_variants.py .wt/tutorials/03-matrix-multiplication.py --variants mma_ring_swizzle=0 \
    --configs "${SW_W2:-64x32x32:w2:s5,32x64x32:w2:s5,64x64x32:w2:s4}" --sizes "${SW_SIZES:-1280,4096}" 2>&1 \
    | grep -v -i warn | tee "$OUT/t03_w2.log"
  [ "${SW_ONLY_W2:-}" = 1 ] || timeout 200 python3 bench/t03_variants.py .wt/tutorials/03-matrix-multiplication.py \
    --variants "sm90a_for_dots=0;sm90a_for_dots=0,mma_ring_swizzle=0" --target cuda:sm_90 \
    --configs "${SW_W4:-128x128x32:w4:s4,64x128x32:w4:s4,128x256x64:w8:s3}" --sizes "${SW_W4_SIZES:-4096}" 2>&1 \
    | grep -v -i warn | tee "$OUT/t03_mma_w4.log"
  if [ -n "${SW_T03_POINTS:-}" ]; then  # tutorial 03's configs alone, each side (fp8 w2: the byte ring on mma.sync)
    timeout 240 python3 bench/tutorial03_configs.py .wt/tutorials --points "$SW_T03_POINTS" 2>&1 | grep -v -i warn \
      | tee "$OUT/tutorial03_configs.log" | tail -45
  fi
  if [ -n "${SW_BT:-}" ]; then  # C = A @ B.T at two-warp configs: B's N x K ring on mma.sync, both sides
    timeout 200 python3 bench/matmul_bt.py --configs "$SW_BT" 2>&1 | grep -v -i warn | tee "$OUT/matmul_bt.log" | tail -12
  fi
fi
if [ "$stage" = ncu_t03 ]; then
  # tutorial 03's kernel at one config and point under Nsight Compute, each side (bench/tutorial03_configs.py's
  # T03_ONCE; carry .wt/tutorials): where a per-iteration gap goes
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  if [ -n "${NCU_TESTS:-}" ]; then  # GPU tests to run first (pytest arguments)
    timeout 200 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore $NCU_TESTS 2>&1 \
      | tee "$OUT/ncu_tests.log" | tail -8
  fi
  ncu_side() {  # side, then ncu's options: one launch of the config under Nsight Compute
    local side=$1; shift
    T03_ONCE="${T03_CFG:-128x128x32 g8 w4 s4}" TILEC_CACHE_DIR=$(mktemp -d) timeout 200 "$NCU" --kernel-name regex:matmul_kernel \
      --launch-skip 2 --launch-count 1 "$@" python3 bench/tutorial03_configs.py --child "$side" "$PWD/.wt/tutorials" "${T03_POINT:-fp16:1280}"
  }
  for side in triton tilec; do
    ncu_side $side --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section LaunchStats --section Occupancy > "$OUT/ncu_t03_$side.log" 2>&1
    echo "== $side (ncu exit $?)"; grep -v -i "warn\|^==PROF==\|----" "$OUT/ncu_t03_$side.log" | grep -E "^\s+[A-Z][A-Za-z /.-]+\s{2,}" | head -80
    if [ -n "${T03_SOURCE:-}" ]; then  # per SASS instruction: executions and stall samples, into $OUT
      ncu_side $side --section WarpStateStats --section SourceCounters --import-source no -f -o "$OUT/t03_$side" > /dev/null 2>&1
      "$NCU" -i "$OUT/t03_$side.ncu-rep" --page source --csv --print-source sass > "$OUT/t03_${side}_sass.csv" 2>&1
      "$NCU" -i "$OUT/t03_$side.ncu-rep" --page details --print-details all > "$OUT/t03_${side}_details.txt" 2>&1
      rm -f "$OUT/t03_$side.ncu-rep"  # 8 files come back at most: the two exports, not the report
      echo "source page: $(wc -l < "$OUT/t03_${side}_sass.csv") lines"; grep -i "stall" "$OUT/t03_${side}_details.txt" | head -30
    fi
  done
fi
if [ "$stage" = bmm ]; then
  # issue 24's batched matmul after a change to the pipelined loop's addressing or the wgmma descriptors: the probe's
  # variants timed against Triton (and their PTX and cubins), then the GPU tests of every dot, pipeline, TMA and
  # attention path; SPEED=1 adds the speed table in the time left
  t0=$(date +%s); left() { echo $(( ${BMM_BUDGET:-540} - ($(date +%s) - t0) )); }
  timeout 120 python3 bench/bmm_probe.py --dump "$OUT/bmm_asm" 2>&1 | grep -v -i warn | tee "$OUT/bmm_probe.log"
  timeout 240 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_gpu.py \
    tests/cuda/test_gpu_dot_types.py tests/cuda/test_tma.py tests/cuda/test_attention.py tests/cuda/test_wgmma.py \
    tests/cuda/test_pipeline.py tests/cuda/test_mma.py 2>&1 | tee "$OUT/bmm_tests.log" | tail -8
  if [ "${SPEED:-}" = 1 ] && [ "$(left)" -gt 120 ]; then
    timeout "$(left)" python3 bench/speed.py --budget-s $(( $(left) - 40 )) --json "$OUT/speed.json" 2>&1 \
      | grep -v -i warn | tee "$OUT/speed.log" | tail -40
  fi
fi
if [ "$stage" = speed_all ]; then
  # issue 24 in one call: the GPU tests of the paths a change to elementwise lowering, pipelined addressing or
  # the assembler's retry touches; FlagGems' ops timed in CUDA graphs (kernels against kernels; carry
  # .wt/flaggems); then the speed table (launch overhead and torch.compile models included) in the time left
  t0=$(date +%s); left() { echo $(( ${SPEED_ALL_BUDGET:-560} - ($(date +%s) - t0) )); }
  timeout 150 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_gpu_every_op.py \
    tests/cuda/test_scan_parallel.py tests/cuda/test_sort_gather.py tests/cuda/test_division_gpu.py tests/cuda/test_launch_gpu.py \
    2>&1 | tee "$OUT/speed_all_tests.log" | tail -6
  if [ -d .wt/flaggems/src ]; then
    PYTHONPATH=$PWD/.wt/flaggems/src:$PYTHONPATH timeout 170 python3 bench/flaggems_ops.py --graph --timeout 80 2>&1 \
      | grep -v -i warn | tee "$OUT/flaggems_ops_graph.log" | tail -24
  fi
  [ "$(left)" -gt 120 ] && timeout "$(left)" python3 bench/speed.py --budget-s $(( $(left) - 45 )) --json "$OUT/speed.json" 2>&1 \
    | grep -v -i warn | tee "$OUT/speed.log" | tail -40
fi
if [ "$stage" = tutorial_timings ]; then
  # Triton's tutorials as published (carry .wt/tutorials), each run under Triton and under the drop-in with its own
  # perf_report benchmarks timed (bench/tutorial_timings.py: the triton providers, every STRIDE-th x value; the
  # host-bound ones twice a side, best kept); the GPU tests of the loop costs, gpu-prefetch and warm launches first
  timeout 100 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_loop_costs.py \
    tests/cuda/test_prefetch.py tests/cuda/test_launch_gpu.py 2>&1 | tee "$OUT/tests.log" | tail -4
  timeout "${TT_TIMEOUT:-480}" python3 bench/tutorial_timings.py .wt/tutorials --only "${TUTORIALS:-01,02,03,05}" \
    --rounds "${TT_ROUNDS:-02=2,03=2}" --timeout "${TT_EACH:-150}" --json "$OUT/tutorial_timings.json" 2>&1 \
    | grep -v -i warn | tee "$OUT/tutorial_timings.log" | tail -60
fi
if [ "$stage" = tut_probe ]; then
  # after the tutorial timings: the warm-build memo's GPU test, the fused-softmax tutorial's host path
  # (bench/softmax_host.py), tutorial 03's matmul at its slow points (bench/tutorial03_probe.py), then the
  # tutorials named in TUTORIALS (if any) timed again
  timeout 90 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_launch_gpu.py \
    2>&1 | tee "$OUT/launch_gpu_tests.log" | tail -4
  timeout 100 python3 bench/softmax_host.py .wt/tutorials/02-fused-softmax.py 2>&1 | grep -v -i warn \
    | tee "$OUT/softmax_host.log" | head -40
  timeout 300 python3 bench/tutorial03_probe.py .wt/tutorials/03-matrix-multiplication.py 2>&1 | grep -v -i warn \
    | tee "$OUT/tutorial03_probe.log" | tail -30
  if [ -n "${TUTORIALS:-}" ]; then
    timeout 200 python3 bench/tutorial_timings.py .wt/tutorials --only "$TUTORIALS" --timeout 150 \
      --json "$OUT/tutorial_timings.json" 2>&1 | grep -v -i warn | tee "$OUT/tutorial_timings.log" | tail -20
  fi
fi
if [ "$stage" = softmax_rows ]; then
  # the fused-softmax tutorial's short rows under Triton and the drop-in's variants (bench/softmax_rows.py), the
  # drop-in's GPU tests, then the tutorials named in TUTORIALS (default 02,03) timed by their own benchmarks
  timeout 150 python3 bench/softmax_rows.py .wt/tutorials/02-fused-softmax.py ${SR_MODES:+--modes $SR_MODES} 2>&1 \
    | grep -v -i warn | tee "$OUT/softmax_rows.log"
  timeout 90 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_launch_gpu.py \
    tests/cuda/test_prefetch.py 2>&1 | tee "$OUT/tests.log" | tail -4
  timeout "${TT_TIMEOUT:-330}" python3 bench/tutorial_timings.py .wt/tutorials --only "${TUTORIALS:-02,03}" --timeout 160 \
    --json "$OUT/tutorial_timings.json" 2>&1 | grep -v -i warn | tee "$OUT/tutorial_timings.log" | tail -30
fi
if [ "$stage" = dropin_host ]; then
  # where a tutorial benchmark call's time goes under Triton and the drop-in (bench/dropin_host.py), then the
  # tutorials named in TUTORIALS (if any) timed by their own benchmarks
  timeout 240 python3 bench/dropin_host.py .wt/tutorials ${DH_ONLY:+--only $DH_ONLY} 2>&1 | grep -v -i warn | tee -a "$OUT/dropin_host.log" | head -120
  if [ -n "${TUTORIALS:-}" ]; then
    timeout "${TT_TIMEOUT:-300}" python3 bench/tutorial_timings.py .wt/tutorials --only "$TUTORIALS" --timeout 160 \
      --json "$OUT/tutorial_timings.json" 2>&1 | grep -v -i warn | tee "$OUT/tutorial_timings.log" | tail -30
  fi
fi
if [ "$stage" = libraries ]; then
  # issue 24's library kernels not in the FlagGems table: Liger-Kernel's softmax, 32,000-word cross-entropy, KL
  # divergence and RoPE (carry .wt/liger: bench/NOTES-dropin.md), FlagGems' autotuned L2 norm and rotary embedding
  # (carry .wt/flaggems); in CUDA graphs, then with each side's launch path (LIB_PROFILE=1: where tilec's host
  # time goes, cProfile under each row)
  for g in --graph ""; do
    p=$([ -z "$g" ] && [ -n "${LIB_PROFILE:-}" ] && echo --profile)
    [ -d .wt/liger/src ] && PYTHONPATH=$PWD/.wt/liger/src:$PYTHONPATH timeout 160 python3 bench/flaggems_ops.py --library liger \
      $g $p --timeout 75 2>&1 | grep -v -i warn | tee -a "$OUT/libraries.log" | tail -${LIB_TAIL:-9}
    [ -d .wt/flaggems/src ] && PYTHONPATH=$PWD/.wt/flaggems/src:$PYTHONPATH timeout 160 python3 bench/flaggems_ops.py \
      --only vector_norm,rotary $g $p --timeout 75 2>&1 | grep -v -i warn | tee -a "$OUT/libraries.log" | tail -${LIB_TAIL:-7}
  done
fi
if [ "$stage" = host_ablate ]; then
  # tutorial 02's softmax(x) with one step left out at a time and tutorial 05's backward (bench/dropin_host.py,
  # DROPIN_ABLATE=1; carry .wt), then the drop-in's side again on the tree in .wt/old (`git archive`)
  DROPIN_ABLATE=1 timeout 330 python3 bench/dropin_host.py .wt/tutorials --only "${DH_ONLY:-02,05}" 2>&1 | grep -v -i warn \
    | tee "$OUT/dropin_host.log"
  [ -d .wt/old/client ] && PYTHONPATH=$PWD/.wt/old:${PYTHONPATH#$PWD:} DROPIN_ABLATE=1 DROPIN_MODES=tilec timeout 150 \
    python3 bench/dropin_host.py .wt/tutorials --only 02 2>&1 | grep -v -i warn | sed "s/^/old /" | tee -a "$OUT/dropin_host.log"
fi
if [ "$stage" = host_recheck ]; then
  # after a change to the warm launch path: the GPU tests of every op and of warm launches, the fused-softmax
  # tutorial timed by its own benchmark (3 rounds a side, best kept), then the speed table in the time left
  t0=$(date +%s); left() { echo $(( ${HR_BUDGET:-560} - ($(date +%s) - t0) )); }
  timeout 200 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_gpu_every_op.py \
    tests/cuda/test_launch_gpu.py tests/cuda/test_prefetch.py ${HR_TESTS:-} 2>&1 | tee "$OUT/tests.log" | tail -4
  # HR_DROPIN=03 (or 02,03): where a tutorial call's host time goes first (bench/dropin_host.py), into tests.log
  [ -n "${HR_DROPIN:-}" ] && timeout 150 python3 bench/dropin_host.py .wt/tutorials --only "$HR_DROPIN" 2>&1 \
    | grep -v -i warn | tee -a "$OUT/tests.log" | grep -E "^0[23] " | head -40
  timeout "${HR_TT_TIMEOUT:-150}" python3 bench/tutorial_timings.py .wt/tutorials --only "${TUTORIALS:-02}" \
    --rounds "${TT_ROUNDS:-02=3}" --timeout "${TT_EACH:-60}" --json "$OUT/tutorial_timings.json" 2>&1 | grep -v -i warn \
    | tee "$OUT/tutorial_timings.log" | tail -34
  [ "$(left)" -gt 120 ] && timeout "$(left)" python3 bench/speed.py --budget-s $(( $(left) - 45 )) --json "$OUT/speed.json" 2>&1 \
    | grep -v -i warn | tee "$OUT/speed.log" | tail -40
fi
if [ "$stage" = coalesce ]; then
  # after a change to the access layouts (gpu-layout): the GPU tests that launch strided and unaligned tiles, tutorial
  # 03's configs one by one on both sides (carry .wt/tutorials), the speed table; then FlagGems' ops in CUDA graphs
  # (carry .wt/flaggems) in the time left
  t0=$(date +%s); left() { echo $(( ${CO_BUDGET:-560} - ($(date +%s) - t0) )); }
  timeout "${CO_TESTS_S:-220}" python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_gpu.py \
    tests/cuda/test_gpu_every_op.py tests/cuda/test_sort_gather.py tests/cuda/test_scan_parallel.py tests/cuda/test_prefetch.py \
    ${CO_TESTS:-} 2>&1 | tee "$OUT/tests.log" | tail -6
  timeout 150 python3 bench/tutorial03_configs.py .wt/tutorials ${CO_POINTS:+--points $CO_POINTS} 2>&1 | grep -v -i warn \
    | tee "$OUT/tutorial03_configs.log" | tail -60
  [ "$(left)" -gt 100 ] && timeout "$(left)" python3 bench/speed.py --budget-s $(( $(left) - 40 )) ${CO_SPEED_ONLY:+--only "$CO_SPEED_ONLY"} \
    --json "$OUT/speed.json" 2>&1 | grep -v -i warn | tee "$OUT/speed.log" | tail -34
  if [ -d .wt/flaggems/src ] && [ "$(left)" -gt 90 ]; then
    PYTHONPATH=$PWD/.wt/flaggems/src:$PYTHONPATH timeout "$(left)" python3 bench/flaggems_ops.py --graph --timeout 80 2>&1 \
      | grep -v -i warn | tee "$OUT/flaggems_ops_graph.log" | tail -22
  fi
fi
if [ "$stage" = softmax_kernel ]; then
  # the fused-softmax tutorial's kernel alone, L2 cold, Triton's build against tilec's at gpu-prefetch depths
  # (bench/softmax_kernel.py; carry .wt/tutorials), after the prefetch GPU tests
  timeout 100 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_prefetch.py \
    2>&1 | tee "$OUT/tests.log" | tail -3
  timeout 300 python3 bench/softmax_kernel.py .wt/tutorials/02-fused-softmax.py ${SK_REGS:+--regs $SK_REGS} 2>&1 \
    | grep -v -i warn | tee "$OUT/softmax_kernel.log"
fi
if [ "$stage" = tutorials_ops ]; then
  # the GPU tests of this session's launch and lowering changes, Triton's tutorials as published timed by their own
  # benchmarks (carry .wt/tutorials), then FlagGems' ops in CUDA graphs (carry .wt/flaggems) in the time left
  t0=$(date +%s); left() { echo $(( ${TO_BUDGET:-540} - ($(date +%s) - t0) )); }
  timeout 120 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_loop_costs.py \
    tests/cuda/test_prefetch.py tests/cuda/test_launch_gpu.py tests/cuda/test_gpu.py 2>&1 | tee "$OUT/tests.log" | tail -5
  timeout 300 python3 bench/tutorial_timings.py .wt/tutorials --only "${TUTORIALS:-01,02,03,05}" --timeout 140 \
    --json "$OUT/tutorial_timings.json" 2>&1 | grep -v -i warn | tee "$OUT/tutorial_timings.log" | tail -56
  if [ -d .wt/flaggems/src ] && [ "$(left)" -gt 100 ]; then
    PYTHONPATH=$PWD/.wt/flaggems/src:$PYTHONPATH timeout "$(left)" python3 bench/flaggems_ops.py --graph --timeout 80 2>&1 \
      | grep -v -i warn | tee "$OUT/flaggems_ops_graph.log" | tail -22
  fi
fi
if [ "$stage" = cluster ]; then
  # issue 28's drill on every GPU of the machine (bench/cluster_gpu.py: PostgreSQL, Redis, the API and one worker
  # per GPU from the carried wheels; scaling rounds, faults, the launching client), then issue 27's zero_jit with
  # a FlagGems op (ZERO_JIT_OP, default layer_norm; carry .wt/flaggems) on one GPU once the drill is over
  timeout "${DRILL_TIMEOUT:-420}" python3 bench/cluster_gpu.py --target cuda:sm_90 --workers "${DRILL_WORKERS:-1,2,4}" \
    --jobs "${DRILL_JOBS:-16}" --faults --budget-s "${DRILL_BUDGET:-360}" --json "$OUT/cluster_gpu.json" \
    --logs "$OUT/cluster_logs.tar.gz" 2>&1 | tee "$OUT/cluster_gpu.log" | tail -60
  echo "drill exit ${PIPESTATUS[0]}"
  if [ -d .wt/flaggems ]; then
    tilec_command
    CUDA_VISIBLE_DEVICES=0 PYTHONPATH=$PWD/.wt/flaggems/src:$PYTHONPATH PATH=/tmp/bin:$PATH timeout 170 \
      python3 bench/zero_jit.py --target cuda:sm_90 --op "${ZERO_JIT_OP:-layer_norm}" --json "$OUT/zero_jit.json" \
      2>&1 | grep -v -i warn | tee "$OUT/zero_jit.log" | tail -14
  fi
  if [ "${CONFIG_SWEEP:-}" = 1 ]; then  # each config of the bench matmuls alone under both, on an idle GPU of its own
    CUDA_VISIBLE_DEVICES=1 timeout 200 python3 bench/config_sweep.py > "$OUT/config_sweep.log" 2>&1 &
  fi
  if [ -n "${TUTORIALS:-}" ]; then  # tutorials (carry .wt/tutorials) on one GPU after the drill, e.g. TUTORIALS=08
    CUDA_VISIBLE_DEVICES=0 timeout $(( ${TUTORIAL_TIMEOUT:-240} * 2 + 30 )) python3 bench/tutorials.py .wt/tutorials \
      --only "$TUTORIALS" --timeout "${TUTORIAL_TIMEOUT:-240}" --json "$OUT/tutorials.json" 2>&1 | tee "$OUT/tutorials.log" | tail -50
  fi
  wait; [ -f "$OUT/config_sweep.log" ] && grep -v -i warn "$OUT/config_sweep.log" | tail -40
fi
if [ "$stage" = flaggems ]; then
  # issue 23: FlagGems' own test suite (carry its repository's src/ and tests/ as .wt/flaggems) under plain Triton
  # and under the drop-in (TILEC_STRICT=fallback: a kernel tilec cannot take fails its test), files spread over every
  # GPU, one test in FLAGGEMS_SAMPLE (the same in both runs), in the suite's quick mode; FLAGGEMS_ARGS adds options
  export PYTHONPATH=$PWD/.wt/flaggems/src:$PYTHONPATH
  dl=${FLAGGEMS_DEADLINE:-300}
  if [ -n "${PRE_TESTS:-}" ]; then  # GPU tests to run first, on GPU 0 (e.g. the test of a fix the suite is about to use)
    CUDA_VISIBLE_DEVICES=0 timeout 120 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore \
      $PRE_TESTS 2>&1 | tee "$OUT/pre_tests.log" | tail -6
  fi
  # FLAGGEMS_PROBE=1: bench/flaggems_probe.py, then the tutorials named in TUTORIALS (if any), on the last GPU
  # beside the suite
  if [ "${FLAGGEMS_PROBE:-}" = 1 ]; then
    (  # each step gets what is left of the suite's deadline ($SECONDS counts from this subshell's start)
      export CUDA_VISIBLE_DEVICES=$(( $(nvidia-smi -L | grep -c '^GPU ') - 1 ))
      left() { echo $(( dl + 30 - SECONDS > 5 ? dl + 30 - SECONDS : 5 )); }
      if [ "${GPU_TESTS:-}" = 1 ]; then  # the GPU tests of warm launches (Inductor's, duck-typed tensors, one cubin
        # of two argument layouts) first
        timeout 120 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore \
          tests/cuda/test_launch_gpu.py > "$OUT/gpu_tests.log" 2>&1
      fi
      if [ "${ZERO_JIT:-}" = 1 ]; then  # issue 27 on the GPU: record, pull, strict (`tilec` as a command)
        tilec_command
        PATH=/tmp/bin:$PATH timeout "$(left)" python3 bench/zero_jit.py --target cuda:sm_90 --json "$OUT/zero_jit.json" \
          > "$OUT/zero_jit.log" 2>&1
      fi
      [ -n "${TUTORIALS:-}" ] && timeout "$(left)" python3 bench/tutorials.py .wt/tutorials --only "$TUTORIALS" \
        --timeout 60 > "$OUT/tutorials.log" 2>&1
      if [ "${DIAG:-}" = 1 ]; then  # issue 24's diagnostics: where a torch.compile'd call's host time goes, and
        # each autotune config of the bench matmuls alone under both (timed beside the suite: ratios, not figures)
        { timeout 90 python3 bench/speed.py --profile --only "none" --budget-s 1; timeout 120 python3 bench/config_sweep.py; } \
          > "$OUT/diag.log" 2>&1
      fi
      [ "${OPS:-}" = 1 ] && timeout "$(left)" python3 bench/flaggems_ops.py > "$OUT/flaggems_ops.log" 2>&1
      timeout "$(left)" python3 bench/flaggems_probe.py > "$OUT/probe.log" 2>&1
    ) &
  fi
  timeout $((dl + 60)) python3 bench/flaggems.py .wt/flaggems/tests --pytest-args "--mode quick" --deadline "$dl" \
    --sample "${FLAGGEMS_SAMPLE:-1}" --slots "${FLAGGEMS_SLOTS:-3}" --modes "${FLAGGEMS_MODES:-triton,tilec}" \
    --shards "${FLAGGEMS_SHARDS:-1}" --json "$OUT/flaggems.json" --logs "$OUT/flaggems_logs" \
    ${FLAGGEMS_ARGS:-} 2>&1 | tee "$OUT/flaggems.log" | tail -50
  (cd "$OUT" && tar czf flaggems_logs.tgz flaggems_logs && rm -rf flaggems_logs)
  wait; [ -f "$OUT/probe.log" ] && tail -20 "$OUT/probe.log"; [ -f "$OUT/tutorials.log" ] && tail -30 "$OUT/tutorials.log"
  [ -f "$OUT/zero_jit.log" ] && tail -25 "$OUT/zero_jit.log"; [ -f "$OUT/diag.log" ] && grep -v -i warn "$OUT/diag.log" | tail -70
  [ -f "$OUT/gpu_tests.log" ] && tail -15 "$OUT/gpu_tests.log"; [ -f "$OUT/flaggems_ops.log" ] && cat "$OUT/flaggems_ops.log"
fi
if [ "$stage" = dropin ]; then
  # issues 23, 24 and 27 in one call on a machine of several GPUs: FlagGems' suite (the flaggems stage's settings)
  # on every GPU but the last; on the last, one after another while the suite runs: the speed table (SPEED_BUDGET
  # s), the GPU tests of warm launches, zero_jit (record, pull, strict), FlagGems' ops timed under Triton and
  # tilec, each config of the bench matmuls alone, and the probe; the steps after the speed table share one log
  export PYTHONPATH=$PWD/.wt/flaggems/src:$PYTHONPATH
  n=$(nvidia-smi -L | grep -c '^GPU '); last=$((n - 1)); dl=${FLAGGEMS_DEADLINE:-300}
  tilec_command
  (
    export CUDA_VISIBLE_DEVICES=$last
    left() { echo $(( dl + 40 - SECONDS > 5 ? dl + 40 - SECONDS : 5 )); }
    x="$OUT/extras.log"
    PATH=/tmp/bin:$PATH timeout 120 python3 bench/zero_jit.py --target cuda:sm_90 --json "$OUT/zero_jit.json" > "$x" 2>&1
    timeout $((${SPEED_BUDGET:-150} + 60)) python3 bench/speed.py --budget-s "${SPEED_BUDGET:-150}" --json "$OUT/speed.json" \
      2>&1 | grep -v -i warn > "$OUT/speed.log"
    timeout 90 python3 -m pytest -q -rf --tb=short --noconftest -p no:cacheprovider -W ignore tests/cuda/test_launch_gpu.py \
      >> "$x" 2>&1
    timeout "$(left)" python3 bench/flaggems_probe.py >> "$x" 2>&1
    timeout "$(left)" python3 bench/flaggems_ops.py >> "$x" 2>&1
    timeout "$(left)" python3 bench/config_sweep.py >> "$x" 2>&1
  ) &
  side=$!
  timeout $((dl + 60)) python3 bench/flaggems.py .wt/flaggems/tests --pytest-args "--mode quick" --deadline "$dl" \
    --gpus "$last" --sample "${FLAGGEMS_SAMPLE:-1}" --slots "${FLAGGEMS_SLOTS:-3}" --shards "${FLAGGEMS_SHARDS:-1}" \
    --modes "${FLAGGEMS_MODES:-triton,tilec}" --json "$OUT/flaggems.json" --logs "$OUT/flaggems_logs" ${FLAGGEMS_ARGS:-} > "$OUT/flaggems.log" 2>&1
  wait $side
  (cd "$OUT" && tar czf flaggems_logs.tgz flaggems_logs && rm -rf flaggems_logs)
  tail -30 "$OUT/flaggems.log"; tail -36 "$OUT/speed.log"; grep -v -i warn "$OUT/extras.log" | tail -90
fi
