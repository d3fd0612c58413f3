#!/bin/bash
# Where the joint step's time goes, kernel by kernel: the TF32 profile with
# every row, ncu's duration / DRAM / SM throughput / occupancy / registers
# for every kernel of one bench-config joint step, the standalone RealSpace
# timings and the bench rows. Logs into $OUT. About 4 minutes.
source "$(dirname "$0")/env.sh"
cd $B
echo "=== bench"; s=$SECONDS
timeout 60 ./ecenet bench --config bench --diamond 4 --backend cuda:tf32,cuda:f32 --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror"; echo "$((SECONDS-s))s"
echo "=== profile (TF32)"; s=$SECONDS
timeout 60 ./ecenet profile --config bench --diamond 4 --backend cuda --precision f32 --tf32 --n-warmup 2 --n-time 5 --op-profile --profile-rows 70 > $OUT/prof_tf32.txt 2>&1; echo "rc=$? $((SECONDS-s))s"
echo "=== RealSpace standalone"; s=$SECONDS
timeout 60 ./cuda_bench --rs-only --rs-no-sweep > $OUT/rs.txt 2>&1; echo "rc=$? $((SECONDS-s))s"; grep -v "^ *$" $OUT/rs.txt | tail -14
echo "=== ncu: every kernel of one joint TF32 step"; s=$SECONDS
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size,dram__bytes.sum
timeout 200 ncu --csv --page raw --metrics $M -c 400 ./ecenet bench --config bench --diamond 4 --backend cuda:tf32 --n-warmup 0 --n-time 1 > $OUT/ncu_all.csv 2> $OUT/ncu_err.txt; echo "rc=$? $((SECONDS-s))s"; tail -3 $OUT/ncu_err.txt; wc -l $OUT/ncu_all.csv
