#!/bin/bash
# The split-TF32 strict-fp32 GEMM (src/cuda/cuda_linear_x3.cuh) on the device,
# most telling first (a call cut short still returns the first parts):
# x3_check (every kernel variant on awkward shapes against a host sum);
# split_bench (when it travelled in .cudabuild); the bench rows (ROWS,
# default cuda:f64+nlist,cuda:f32+nlist; fp64 first so that the fp32 rows'
# dE/E and dF/Fmax are errors against fp64) of the previous build when it
# travelled, and of this one as built (the kernel with ECENET_X3_ACC=chain2
# on the pre-split weights), with ECENET_FP32_GEMM=sgemm, ECENET_X3_ACC=chain
# and =tc, alternated
# twice; then check_backends (CB_ROW, default the strict-fp32 row cuda:f32;
# CB_CASES, default "golden ops") with X3ENV set (default
# ECENET_FP32_GEMM=x3), the golden case again with sgemm; or, with FULL=1,
# check_cuda, check_backends (case by case: golden, determinism, then ops)
# and check_options on the cuda rows with the build's defaults (OPS_ROWS,
# e.g. "cuda:f64 cuda:f32": the ops case on those rows only); a memcheck of
# a small bench (X3ENV); FULL benches only the default and sgemm. About 3
# minutes (FULL: 8, within one call's 600 s on a normal machine).
#   bash tools/device/x3.sh
source "$(dirname "$0")/env.sh"
cd $B; [[ -x ecenet_base || ! -f base.tar.xz ]] || tar -xJf base.tar.xz
T0=$SECONDS
X3ENV=${X3ENV-ECENET_FP32_GEMM=x3}
[[ -x ./x3_check ]] && { echo "== x3_check"; ./x3_check 2>&1 | tee $OUT/x3_check.txt | grep -E "FAIL|refused|launch|x3_check:"; }
[[ -x ./split_bench ]] && { echo "== split_bench"; ./split_bench 2>&1 | tee $OUT/split_bench.txt; }
CFGS=("ecenet" "ecenet ECENET_FP32_GEMM=sgemm" "ecenet ECENET_X3_ACC=chain" "ecenet ECENET_X3_ACC=tc")
[[ -n $FULL ]] && CFGS=("ecenet" "ecenet ECENET_FP32_GEMM=sgemm") # the tests need the time
[[ -x ecenet_base ]] && CFGS=("ecenet_base" "${CFGS[@]}")
echo "== bench, alternated $((SECONDS-T0))s"
for rep in 1 2; do
  for cfg in "${CFGS[@]}"; do
    set -- $cfg; bin=$1; shift
    env "$@" timeout 90 ./$bin bench --config bench --diamond 4 --backend ${ROWS:-cuda:f64+nlist,cuda:f32+nlist} --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/$cfg | /"
  done
done
if [[ -n $FULL ]]; then # the CUDA part of make check, with the build's defaults
  echo "== check_cuda $((SECONDS-T0))s"; timeout 60 ./check_cuda > $OUT/check_cuda.log 2>&1; echo "rc=$?"; tail -1 $OUT/check_cuda.log
  # case by case: the whole suite over the three cuda rows has run past
  # 270-330 s on slow machines and lost its last case (ops alone: 294 s on
  # an H200, seventeenth session; golden 18 s; determinism 6 s)
  # OPS_ROWS="cuda:f64 cuda:f32": the ops case on those rows only, one run each
  PAIRS="golden:cuda determinism:cuda"
  for r in ${OPS_ROWS:-cuda}; do PAIRS+=" ops:$r"; done
  for p in $PAIRS; do
    c=${p%%:*}; row=${p#*:}; tag=${row#cuda}; tag=${tag//:/_}
    echo "== check_backends $c, $row rows $((SECONDS-T0))s"
    ECENET_TEST_BACKEND=$row CK_RUN_CASE=$c timeout $([[ $c == ops ]] && echo ${CB_LIMIT:-360} || echo 120) \
      ./check_backends > $OUT/check_backends_$c$tag.log 2>&1
    echo "rc=$?"; grep -E "%:|:F:|:E:" $OUT/check_backends_$c$tag.log | cut -c1-300 | tail -4
  done
  echo "== check_options $((SECONDS-T0))s"; ECENET_TEST_BACKEND=cuda timeout 120 ./check_options > $OUT/check_options.log 2>&1
  echo "rc=$?"; grep -E "%:|:F:|:E:" $OUT/check_options.log | cut -c1-300 | tail -4
else
  for c in ${CB_CASES:-golden ops}; do
    echo "== check_backends (cuda, x3 on, case $c) $((SECONDS-T0))s"
    env $X3ENV ECENET_TEST_BACKEND=${CB_ROW:-cuda:f32} CK_RUN_CASE=$c timeout ${CB_LIMIT:-300} ./check_backends > $OUT/check_backends_$c.log 2>&1
    echo "rc=$?"; grep -E "%:|:F:|:E:" $OUT/check_backends_$c.log | cut -c1-300 | tail -6
  done
  echo "== check_backends golden with sgemm, for the errors side by side $((SECONDS-T0))s"
  env ECENET_FP32_GEMM=sgemm ECENET_TEST_BACKEND=${CB_ROW:-cuda:f32} CK_RUN_CASE=golden timeout 120 ./check_backends 2>&1 | grep -v "^skip" | tee $OUT/check_backends_golden_sgemm.log | tail -7
  grep -v "^skip" $OUT/check_backends_golden.log | tail -7
fi
echo "== memcheck (x3) $((SECONDS-T0))s"
env $X3ENV timeout 200 compute-sanitizer --tool memcheck --print-limit 20 ./ecenet bench --diamond 2 --backend cuda:f32+nlist --n-warmup 0 --n-time 1 > $OUT/memcheck.log 2>&1
echo "rc=$?"; grep -E "ERROR SUMMARY|Invalid" $OUT/memcheck.log | head -5
echo "== done $((SECONDS-T0))s"
