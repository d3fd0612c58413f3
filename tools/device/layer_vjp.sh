#!/bin/bash
# One device call for the fused wgmma layer VJP (ECENET_LAYER_TC=4,
# twenty-ninth session), most wanted first for a call cut short:
# check_cuda; the golden cases in mode 4; the bench rows with modes 0 and 4
# alternated twice; every kernel's ncu duration in mode 4; on an H200 the
# standalone RealSpace rows and the three bench rows; the op tests on
# cuda:f32+tf32 (they run modes 0, 2, 3 and 4 themselves and count the
# launches); memcheck and determinism in mode 4; the new kernel's ncu
# sections; the per-op profile in modes 0 and 4. Logs: $OUT/layer_vjp.tgz.
# QUICK=1 (a call with little device time left): one bench alternation, no
# determinism, ncu sections nor profile.
#   bash tools/device/layer_vjp.sh      (on the device, after pack.sh here)
source "$(dirname "$0")/env.sh"
cd $B; T0=$SECONDS; R=$(dirname $B); L=/tmp/lvjp; rm -rf $L; mkdir -p $L
sec() { tar -C $L -czf $OUT/layer_vjp.tgz .; echo "== $* $((SECONDS-T0))s"; }
cases() { # ROW CASE LOG [ENV...]
  local row=$1 c=$2 log=$3; shift 3
  env "$@" ECENET_TEST_BACKEND=$row CK_RUN_CASE=$c timeout ${CB_LIMIT:-150} ./check_backends > $L/$log 2>&1
  echo "rc=$?"; grep -E "%:|:F:|:E:" $L/$log | cut -c1-300 | tail -3
}
sec "check_cuda"; timeout 60 ./check_cuda > $L/check_cuda.log 2>&1; echo "rc=$?"; tail -1 $L/check_cuda.log
sec "golden cuda:f32+tf32 TC=4"; cases cuda:f32+tf32 golden golden4.log ECENET_LAYER_TC=4
sec "bench TC 0 / 4 alternated twice"
for rep in $([[ -n $QUICK ]] && echo 1 || echo 1 2); do for t in 0 4; do
  ECENET_LAYER_TC=$t timeout 40 ./ecenet bench --config bench --diamond 4 --backend cuda:f64+nlist,cuda:tf32+nlist --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/TC=$t | /"
done; done
sec "ncu durations TC=4"
ECENET_LAYER_TC=4 timeout 100 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes.sum --csv ./ecenet bench --config bench --diamond 4 --backend cuda:tf32+nlist --n-warmup 0 --n-time 1 > $L/ncu4.csv 2>/dev/null; echo "rc=$?"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  sec "H200: RealSpace standalone"
  timeout 60 ./cuda_bench --rs-only --rs-no-sweep --rs-sin0 --rs-sym --rs-edges 44000 --rs-reps 31 > $L/rs.txt 2>&1; tail -25 $L/rs.txt
  sec "H200: bench, three rows"
  timeout 90 ./ecenet bench --config bench --diamond 4 --backend cuda:f64+nlist,cuda:f32+nlist,cuda:tf32+nlist --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror"
fi
sec "ops cuda:f32+tf32"; CB_LIMIT=200 cases cuda:f32+tf32 ops ops.log
grep -E "layers" $L/ops.log | head -3
sec "memcheck TC=4"
ECENET_LAYER_TC=4 timeout 60 compute-sanitizer --tool memcheck --print-limit 20 ./ecenet bench --diamond 2 --backend cuda:tf32+nlist --n-warmup 0 --n-time 1 > $L/mc4.log 2>&1
echo "rc=$?"; grep -E "ERROR SUMMARY|Invalid" $L/mc4.log | head -3
[[ -n $QUICK ]] && { sec "done (QUICK)"; exit 0; }
sec "determinism cuda:f32+tf32 TC=4"; cases cuda:f32+tf32 determinism det4.log ECENET_LAYER_TC=4
sec "ncu sections of layer_wg_vjp_k"
ECENET_LAYER_TC=4 timeout 100 ncu --clock-control none -k regex:layer_wg_vjp -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis ./ecenet bench --config bench --diamond 4 --backend cuda:tf32+nlist --n-warmup 0 --n-time 1 > $L/ncu_vjp.txt 2>&1; echo "rc=$?"
grep -E "Duration|Throughput|Registers|Achieved Occ" $L/ncu_vjp.txt | head -12
sec "profile TF32 TC=0, TC=4"
for t in 0 4; do
  ECENET_LAYER_TC=$t timeout 90 ./ecenet profile --config bench --diamond 4 --backend cuda --precision f32 --tf32 --device-nlist --n-warmup 2 --n-time 5 --op-profile --profile-rows 40 > $L/profile_tc$t.txt 2>&1; echo "rc=$?"
  grep -E "forward \(measured\)|joint" $L/profile_tc$t.txt | head -3
done
sec "done"
