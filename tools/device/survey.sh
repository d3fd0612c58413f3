#!/bin/bash
# One device call that validates the TF32 row and measures where its time
# goes (twenty-second session), most telling first, so that a call cut short
# by its time limit still returns the first parts: check_cuda; the golden
# cases on cuda:f32+tf32 through ECENET_LAYER_TC 3, 1 and 2; memcheck of a
# small bench through modes 3 and 1; determinism through mode 3; the bench
# rows (fp64, TF32) in modes 0 and 3; `ecenet nve` on the golden diamond in
# fp64, fp32 and TF32 at three time steps; the ops case on cuda:f32+tf32;
# on an H200 the standalone RealSpace rows and the three bench rows; then
# per-kernel ncu durations of one bench (read them here with
# tools/device/ncu_agg.py), the per-op profile of the TF32 step, and ncu
# sections of the frame and MP kernels. Every log goes into one archive,
# $OUT/survey.tgz (the tool returns at most 8 files). About 4 minutes on an
# H100 (216 s in the twenty-second session).
# AB="VAR=value" first tests and times a candidate switch against the
# default (golden on the three cuda rows, the ops case on cuda:f64 (the cp.async
# staging's 8-byte copies), memcheck, racecheck, the bench rows
# alternated twice, ncu durations): about 4 minutes more.
#   bash tools/device/survey.sh      (on the device, after pack.sh here)
#   AB=ECENET_FRAME_ASYNC=1 bash tools/device/survey.sh
# LEAN=1 (with AB) runs only check_cuda and the A/B block without its
# cuda:f32 golden row and ncu (racecheck limited to 100 s); for a call with
# little device time left.
# QUICK=1 skips what re-validates unchanged default kernels (the golden
# cases through three modes, their memcheck, determinism, the two-mode
# bench, nve, the TF32 ops case, the ncu sections): about
# 2 minutes less, for a call that tests only the AB switch.
source "$(dirname "$0")/env.sh"
cd $B; T0=$SECONDS; R=$(dirname $B); L=/tmp/survey; rm -rf $L; mkdir -p $L
# each section first saves the logs so far: a call killed at its time limit
# still returns them
sec() { tar -C $L -czf $OUT/survey.tgz .; echo "== $* $((SECONDS-T0))s"; }
cases() { # ROW CASE LOG [ENV...]: one check_backends case
  local row=$1 c=$2 log=$3; shift 3
  env "$@" ECENET_TEST_BACKEND=$row CK_RUN_CASE=$c timeout ${CB_LIMIT:-150} ./check_backends > $L/$log 2>&1
  echo "rc=$?"; grep -E "%:|:F:|:E:" $L/$log | cut -c1-300 | tail -3
}
sec "check_cuda"
timeout 60 ./check_cuda > $L/check_cuda.log 2>&1; echo "rc=$?"; tail -1 $L/check_cuda.log
[[ -n $LEAN ]] && QUICK=1 # LEAN: the A/B block only (below)
for t in $([[ -z $QUICK ]] && echo 3 1 2); do
  sec "golden cuda:f32+tf32 ECENET_LAYER_TC=$t"; cases cuda:f32+tf32 golden golden$t.log ECENET_LAYER_TC=$t
done
for t in $([[ -z $QUICK ]] && echo 3 1); do
  sec "memcheck ECENET_LAYER_TC=$t"
  ECENET_LAYER_TC=$t timeout 60 compute-sanitizer --tool memcheck --print-limit 20 ./ecenet bench --diamond 2 --backend cuda:tf32+nlist --n-warmup 0 --n-time 1 > $L/mc$t.log 2>&1
  echo "rc=$?"; grep -E "ERROR SUMMARY|Invalid" $L/mc$t.log | head -3
done
if [[ -n $AB ]]; then # a candidate switch against the default
  sec "A/B: golden with $AB"
  for row in cuda:f32+tf32 $([[ -z $LEAN ]] && echo cuda:f32) cuda:f64; do cases $row golden golden_ab_${row//[^a-z0-9]/_}.log $AB; done
  sec "A/B: ops on cuda:f64 (with the switch off: the tests set it themselves)"
  cases cuda:f64 ops ops_f64.log
  sec "A/B: memcheck and racecheck with $AB"
  env $AB timeout 60 compute-sanitizer --tool memcheck --print-limit 20 ./ecenet bench --diamond 2 --backend cuda:tf32+nlist,cuda:f64+nlist --n-warmup 0 --n-time 1 > $L/mc_ab.log 2>&1
  echo "rc=$?"; grep -E "ERROR SUMMARY|Invalid" $L/mc_ab.log | head -3
  env $AB timeout $([[ -n $LEAN ]] && echo 100 || echo 150) compute-sanitizer --tool racecheck --print-limit 20 ./ecenet bench --config small --diamond 2 --backend cuda:f32+nlist --n-warmup 0 --n-time 1 > $L/rc_ab.log 2>&1
  echo "rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|hazard" $L/rc_ab.log | head -3
  sec "A/B: bench, default and $AB alternated twice"
  for rep in 1 2; do for x in "" "$AB"; do
    env $x timeout 60 ./ecenet bench --config bench --diamond 4 --backend cuda:f64+nlist,cuda:tf32+nlist --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/[${x:-default}] /"
  done; done
  [[ -n $LEAN ]] && { sec "done (LEAN)"; exit 0; }
  sec "A/B: ncu kernel durations with $AB"
  env $AB timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes.sum --csv ./ecenet bench --config bench --diamond 4 --backend cuda:tf32+nlist --n-warmup 0 --n-time 1 > $L/ncu_ab.csv 2>/dev/null; echo "rc=$?"
fi
if [[ -z $QUICK ]]; then
sec "determinism cuda:f32+tf32 ECENET_LAYER_TC=3"; cases cuda:f32+tf32 determinism det3.log ECENET_LAYER_TC=3
sec "bench"
for t in 0 3; do
  ECENET_LAYER_TC=$t timeout 40 ./ecenet bench --config bench --diamond 4 --backend cuda:f64+nlist,cuda:tf32+nlist --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/TC=$t | /"
done
sec "nve, golden diamond (216 atoms), 20 fs"
for cfg in "f64 0.2 100" "f64 0.1 200" "f64 0.05 400" "f32 0.1 200" "f32 0.05 400" \
           "f32 0.2 100 --tf32" "f32 0.1 200 --tf32" "f32 0.05 400 --tf32"; do
  set -- $cfg; f=$L/nve_$1_$2$4.txt; echo "-- $1 dt $2 $4"
  timeout 60 ./ecenet nve --model $R/tests/data/golden/diamond.model.safetensors $R/tests/data/golden_xyz/diamond.extxyz --backend cuda --precision $1 --dt $2 --steps $3 --every 50 $4 > $f 2>&1
  grep -E "drift|max|rms|rror" $f
done
sec "check_backends ops cuda:f32+tf32"; cases cuda:f32+tf32 ops ops.log
fi
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  sec "H200: RealSpace standalone"
  timeout 60 ./cuda_bench --rs-only --rs-no-sweep --rs-sin0 --rs-sym --rs-edges 44000 --rs-reps 31 2>&1 | tail -25 | tee $L/rs.txt
  sec "H200: bench, three rows"
  timeout 90 ./ecenet bench --config bench --diamond 4 --backend cuda:f64+nlist,cuda:f32+nlist,cuda:tf32+nlist --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror"
fi
sec "ncu kernel durations, one bench (forward + joint, TF32)"
timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes.sum --csv ./ecenet bench --config bench --diamond 4 --backend cuda:tf32+nlist --n-warmup 0 --n-time 1 > $L/ncu_all.csv 2>/dev/null; echo "rc=$?"
sec "profile, TF32, device neighbour list"
timeout 90 ./ecenet profile --config bench --diamond 4 --backend cuda --precision f32 --tf32 --device-nlist --n-warmup 2 --n-time 5 --op-profile --profile-rows 40 > $L/profile_tf32.txt 2>&1; echo "rc=$?"
grep -E "forward \(measured\)|joint" $L/profile_tf32.txt | head -3
[[ -n $QUICK ]] && { sec "done (QUICK)"; exit 0; }
sec "ncu sections, frame and MP kernels"
timeout 150 ncu --clock-control none -k regex:"frame_|pu_vjp|mp_scatter|mp_weight" -c 14 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis ./ecenet bench --config bench --diamond 4 --backend cuda:tf32+nlist --n-warmup 0 --n-time 1 > $L/ncu_frame.txt 2>&1; echo "rc=$?"
grep -E "^  [a-z_ ]+.*\(|Duration|DRAM Throughput" $L/ncu_frame.txt | head -45
sec "done"
