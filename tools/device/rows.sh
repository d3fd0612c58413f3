#!/bin/bash
# One short device call for the rows of issue 5's target table (doc/performance.md,
# "Where issue 5's targets stand") on the default kernels, most wanted first:
# check_cuda; the standalone RealSpace kernels (E = 44,000); the bench with the
# three cuda rows, twice; every kernel's ncu duration over one TF32 step; the
# per-op TF32 profile. Logs: $OUT/rows.tgz. Run after pack.sh here, carry .cudabuild.
#   bash tools/device/rows.sh
source "$(dirname "$0")/env.sh"
TD=$PWD/tools/device; cd "$B" || exit 1; T0=$SECONDS; L=/tmp/rows; rm -rf $L; mkdir -p $L
sec() { tar -C $L -czf $OUT/rows.tgz .; echo "== $* $((SECONDS-T0))s"; }
sec "check_cuda"; timeout 60 ./check_cuda > $L/check_cuda.log 2>&1; echo "rc=$?"; tail -1 $L/check_cuda.log
sec "RealSpace standalone"
timeout 60 ./cuda_bench --rs-only --rs-no-sweep --rs-sin0 --rs-sym --rs-edges 44000 --rs-reps 31 > $L/rs.txt 2>&1
echo "rc=$?"; tail -25 $L/rs.txt
sec "bench, three rows, twice"
for rep in 1 2; do
  timeout 90 ./ecenet bench --config bench --diamond 4 --backend cuda:f64+nlist,cuda:f32+nlist,cuda:tf32+nlist --n-warmup 3 --n-time 10 > $L/bench$rep.txt 2>&1
  echo "rc=$?"; grep -E "^cuda|rror|peak" $L/bench$rep.txt
done
sec "ncu durations, TF32"
timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes.sum --csv ./ecenet bench --config bench --diamond 4 --backend cuda:tf32+nlist --n-warmup 0 --n-time 1 > $L/ncu.csv 2>/dev/null; echo "rc=$?"
[[ -s $L/ncu.csv ]] && python3 $TD/ncu_agg.py $L/ncu.csv 25
sec "profile TF32"
timeout 90 ./ecenet profile --config bench --diamond 4 --backend cuda --precision f32 --tf32 --device-nlist --n-warmup 2 --n-time 5 --op-profile --profile-rows 40 > $L/profile.txt 2>&1; echo "rc=$?"
grep -E "forward \(measured\)|joint" $L/profile.txt | head -3
sec "done"
