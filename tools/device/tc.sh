#!/bin/bash
# The tensor-core fused layer (cuda_layer_tc.cu) on the device: every op of
# check_backends (incl. the layer kernel with TC off and on, its launch
# counted), ecenet bench with ECENET_LAYER_TC = 0 / 1 / 2 alternated in one
# run, the bench profiles with the kernel, memcheck + racecheck over it.
# Binaries: doc/gpu-runs.md steps 1-2 (.cudabuild, carried). Logs into $OUT.
source "$(dirname "$0")/env.sh"
echo "=== check_backends ops"; s=$SECONDS
ECENET_TEST_BACKEND=cuda CK_RUN_CASE=ops timeout ${OPS_LIMIT:-200} $B/check_backends > $OUT/ops.log 2>&1; echo "rc=$? $((SECONDS-s))s"
grep -E "%:|:F:|:E:|layers" $OUT/ops.log | cut -c1-220 | tail -12
echo "=== bench: ECENET_LAYER_TC 0 (cuBLAS + RealSpace), 1 (TC for TF32), 2 (also split TF32 for fp32)"; s=$SECONDS
for rep in 1 2; do for tc in 0 1 2; do
  ECENET_LAYER_TC=$tc timeout 60 $B/ecenet bench --config bench --diamond 4 --backend ${BENCH_ROWS:-cuda:tf32,cuda:f32} \
    --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/tc=$tc /"
done; done; echo "$((SECONDS-s))s"
echo "=== ncu: the tensor-core kernels (TF32 forward, split-TF32 forward and VJP)"; s=$SECONDS
NCU="ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats -c 1"
ECENET_LAYER_TC=1 timeout 60 $NCU -k regex:layer_tc_fwd $B/ecenet bench --config bench --diamond 4 --backend cuda:tf32 --n-warmup 0 --n-time 1 > $OUT/ncu_fwd_tf32.txt 2>&1; echo rc=$?
ECENET_LAYER_TC=2 timeout 60 $NCU -k regex:lin_tc_vjp $B/ecenet bench --config bench --diamond 4 --backend cuda:f32 --n-warmup 0 --n-time 1 > $OUT/ncu_vjp_split.txt 2>&1; echo "rc=$? $((SECONDS-s))s"
grep -E "Duration|Throughput|Achieved Occupancy|Registers|Stall|Warp Cycles|Eligible|Issued Warp|L2 Hit|L1/TEX Hit|Bank" $OUT/ncu_fwd_tf32.txt | head -24
echo "=== profiles"; s=$SECONDS
ECENET_LAYER_TC=1 timeout 60 $B/ecenet profile --config bench --diamond 4 --backend cuda --precision f32 --tf32 --n-warmup 2 --n-time 5 --op-profile --profile-rows 12 > $OUT/prof_tc_tf32.txt 2>&1; echo rc=$?
ECENET_LAYER_TC=2 timeout 60 $B/ecenet profile --config bench --diamond 4 --backend cuda --precision f32 --n-warmup 2 --n-time 5 --op-profile --profile-rows 12 > $OUT/prof_tc_split.txt 2>&1; echo "rc=$? $((SECONDS-s))s"
for f in $OUT/prof_tc_tf32.txt $OUT/prof_tc_split.txt; do echo "--- $f"; grep -E -A6 "^  stage0.layer0" $f; grep -E -A5 "^totals" $f; done | cut -c1-120
if [[ -z $NO_SAN ]]; then
echo "=== memcheck + racecheck (bench diamond 2, TC on)"; s=$SECONDS
ECENET_LAYER_TC=2 timeout 90 compute-sanitizer --tool memcheck $B/ecenet bench --config bench --diamond 2 --backend cuda:tf32,cuda:f32 --n-warmup 0 --n-time 1 > $OUT/memcheck.log 2>&1; echo "rc=$?"; tail -2 $OUT/memcheck.log
ECENET_LAYER_TC=1 timeout 120 compute-sanitizer --tool racecheck $B/ecenet bench --config bench --diamond 2 --backend cuda:tf32 --n-warmup 0 --n-time 1 > $OUT/racecheck.log 2>&1; echo "rc=$? $((SECONDS-s))s"; tail -2 $OUT/racecheck.log
fi
