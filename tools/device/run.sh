#!/bin/bash
# The GPU run behind doc/performance.md: tests, bench rows, profile, memcheck.
# Binaries: doc/gpu-runs.md steps 1-2 (.cudabuild/bin.tar.xz, carried). Logs into $OUT.
# About 8 minutes; every step has its own time limit.
source "$(dirname "$0")/env.sh"
test_run() { # name limit
  local s=$SECONDS; echo "=== $1"; ECENET_TEST_BACKEND=cuda timeout $2 $B/$1 > $OUT/$1.log 2>&1; echo "rc=$? $((SECONDS-s))s"
  grep -E "%:|:F:|:E:|TF32 vs|layers" $OUT/$1.log | cut -c1-240 | tail -6
}
test_run check_backends 200
cd $B
ROWS=${ROWS:-cuda:tf32,cuda:f32}
echo "=== bench: RealSpace launch 1024 rows/8 warps vs 512/4, alternated"; s=$SECONDS
for rep in 1 2; do for cfg in 1024:8 512:4 ; do
  ECENET_RS_BLOCK=${cfg%:*} ECENET_RS_WARPS=${cfg#*:} timeout 45 ./ecenet bench --config bench --diamond 4 --backend $ROWS \
    --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/rs=$cfg /"
done; done; echo "$((SECONDS-s))s"
echo "=== bench: tensor-core layer kernels (ECENET_LAYER_TC) 0 / 1 / 2; first row fp64 (the accuracy reference)"; s=$SECONDS
for tc in 0 1 2; do ECENET_LAYER_TC=$tc timeout 30 ./ecenet bench --config bench --diamond 4 --backend cuda:f64,cuda:tf32,cuda:f32 \
  --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/tc=$tc /"; done; echo "$((SECONDS-s))s"
cd ..
test_run check_cuda 60
[[ -n $OPTIONS ]] && test_run check_options 100
cd $B
echo "=== profile (TF32)"; s=$SECONDS
timeout 40 ./ecenet profile --config bench --diamond 4 --backend cuda --precision f32 --tf32 --n-warmup 2 --n-time 5 --op-profile --profile-rows 14 > $OUT/prof_tf32.txt 2>&1; echo "rc=$? $((SECONDS-s))s"
grep -A5 "^totals" $OUT/prof_tf32.txt | cut -c1-120
echo "=== memcheck: tensor-core kernels (bench diamond 2)"; s=$SECONDS
ECENET_LAYER_TC=2 timeout 60 compute-sanitizer --tool memcheck ./ecenet bench --config bench --diamond 2 --backend cuda:tf32,cuda:f32 --n-warmup 0 --n-time 1 > $OUT/memcheck_tc.log 2>&1; echo "rc=$? $((SECONDS-s))s"; tail -1 $OUT/memcheck_tc.log
