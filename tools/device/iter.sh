#!/bin/bash
# One optimisation iteration on the device: the cuda rows of check_backends
# (every op against ref, golden cases, determinism), the bench rows of the
# new binaries against the previous ones (.cudabuild/base.tar.xz: ecenet_base)
# alternated in one run, the layer GEMM forms (gemm_bench), the TF32 profile
# and ncu's per-kernel durations of one forward + joint step (clocks not
# locked: ncu's default base clocks slow the compute-heavy kernels by up to
# 25%). Logs into $OUT. About 6 minutes.
source "$(dirname "$0")/env.sh"
[[ -f $B/base.tar.xz && ! -x $B/ecenet_base ]] && tar -C $B -xJf $B/base.tar.xz
s=$SECONDS; echo "=== check_backends (cuda)"
ECENET_TEST_BACKEND=cuda timeout ${CB_LIMIT:-220} $B/check_backends > $OUT/check_backends.log 2>&1; echo "rc=$? $((SECONDS-s))s"
grep -E "%:|:F:|:E:" $OUT/check_backends.log | cut -c1-300 | tail -8
[[ -n $CUDA_TESTS ]] && { ECENET_TEST_BACKEND=cuda timeout 60 $B/check_cuda > $OUT/check_cuda.log 2>&1; echo "check_cuda rc=$?"; tail -2 $OUT/check_cuda.log; }
cd $B
echo "=== bench: base vs new, alternated"; s=$SECONDS
for rep in 1 2; do for cfg in ecenet_base ecenet ${VARIANT:+ecenet:$VARIANT}; do # VARIANT="ENV=value"
  bin=${cfg%%:*}; env=; [[ $cfg == *:* ]] && env=${cfg#*:}
  env $env timeout 60 ./$bin bench --config bench --diamond 4 --backend ${ROWS:-cuda:tf32,cuda:f32,cuda:f64} --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/$cfg /"
done; done; echo "$((SECONDS-s))s"
echo "=== RealSpace standalone: default, sin0_zero, sin0_zero + 4-channel VJP rows"; s=$SECONDS
for v in "" "--rs-sin0" "V4 --rs-sin0"; do
  if [[ $v == V4* ]]; then export ECENET_RS_VJP_V=4; v=${v#V4 }; fi
  timeout 40 ./cuda_bench --rs-only --rs-no-sweep $v > $OUT/rs.txt 2>&1; echo "--- $v ${ECENET_RS_VJP_V:+V=4} rc=$?"
  grep -E "^ +(fwd|vjp)|device copy" $OUT/rs.txt | cut -c1-150
done; unset ECENET_RS_VJP_V; echo "$((SECONDS-s))s"
[[ -x ./gemm_bench ]] && { echo "=== layer GEMM forms"; timeout 60 ./gemm_bench; }
echo "=== profile (TF32)"; s=$SECONDS
timeout 60 ./ecenet profile --config bench --diamond 4 --backend cuda --precision f32 --tf32 --n-warmup 2 --n-time 5 --op-profile --profile-rows 40 > $OUT/prof_tf32.txt 2>&1; echo "rc=$? $((SECONDS-s))s"
sed -n '/^Joint energy+forces step by self/,/sum of self/p' $OUT/prof_tf32.txt | head -24
echo "=== ncu: every kernel of one joint TF32 step"; s=$SECONDS
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size,dram__bytes.sum
timeout 150 ncu --clock-control none --csv --page raw --metrics $M -c 400 ./ecenet bench --config bench --diamond 4 --backend cuda:tf32 --n-warmup 0 --n-time 1 > $OUT/ncu_all.csv 2> $OUT/ncu_err.txt; echo "rc=$? $((SECONDS-s))s"
if [[ -n $NCU_DETAIL ]]; then # e.g. NCU_DETAIL="frame_in_k frame_out_k": stall reasons and instruction mix
  for k in $NCU_DETAIL; do s=$SECONDS
    timeout 60 ncu --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis --section SpeedOfLight --section Occupancy \
      -k regex:$k -c 1 ./ecenet bench --config bench --diamond 4 --backend cuda:tf32 --n-warmup 0 --n-time 1 > $OUT/ncu_$k.txt 2>&1
    echo "--- $k rc=$? $((SECONDS-s))s"; grep -E "Duration|Stall|Executed Ipc|Issue Slots Busy|Warp Cycles Per Issued|Executed Instructions |Achieved Occupancy|Registers Per|Memory Throughput|Compute \(SM\)" $OUT/ncu_$k.txt | head -16
  done
fi
