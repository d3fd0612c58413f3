#!/bin/bash
# Device check of kernel changes against the previous build (pack.sh BASE=:
# ecenet_base) in one call: check_cuda; check_backends ops on cuda:f64 and
# cuda:f32, golden on cuda:f32+tf32 and cuda:f64; the bench rows of
# ecenet_base, ecenet and ecenet with $VARIANT ("ENV=value") alternated
# twice; ncu durations and DRAM bytes of the kernels matching $KERNELS for
# the three (read them here with tools/device/ncu_agg.py); memcheck,
# racecheck, determinism. Logs in $OUT/kab.tgz. About 5 minutes on an H100
# (314 s in the twenty-fourth session).
#   KERNELS="wigner|frame_atom" VARIANT=ECENET_FRAME_ATOM_RB=0 bash tools/device/kernels_ab.sh
source "$(dirname "$0")/env.sh"
cd $B; [[ -x ecenet_base || ! -f base.tar.xz ]] || tar -xJf base.tar.xz
T0=$SECONDS; L=/tmp/kab; rm -rf $L; mkdir -p $L
sec() { tar -C $L -czf $OUT/kab.tgz .; echo "== $* $((SECONDS-T0))s"; }
cases() { local row=$1 c=$2 log=$3; shift 3
  env "$@" ECENET_TEST_BACKEND=$row CK_RUN_CASE=$c timeout ${CB_LIMIT:-180} ./check_backends > $L/$log 2>&1
  echo "rc=$?"; grep -E "%:|:F:|:E:" $L/$log | cut -c1-300 | tail -3; }
sec check_cuda; timeout 60 ./check_cuda > $L/check_cuda.log 2>&1; echo "rc=$?"; tail -1 $L/check_cuda.log
sec "ops cuda:f64"; cases cuda:f64 ops ops_f64.log
sec "ops cuda:f32"; cases cuda:f32 ops ops_f32.log
sec "golden cuda:f32+tf32"; cases cuda:f32+tf32 golden golden_tf32.log
sec "golden cuda:f64"; cases cuda:f64 golden golden_f64.log
CFGS="ecenet_base ecenet ${VARIANT:+ecenet:$VARIANT}"
sec "bench alternated: $CFGS"
for r in 1 2; do for cfg in $CFGS; do
  bin=${cfg%%:*}; env=; [[ $cfg == *:* ]] && env=${cfg#*:}; [[ -x ./$bin ]] || continue
  env $env timeout 50 ./$bin bench --config bench --diamond 4 --backend cuda:f64+nlist,cuda:tf32+nlist --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/$cfg /"
done; done | tee $L/bench.txt
sec "ncu ${KERNELS:=wigner|frame_}"
for cfg in $CFGS; do
  bin=${cfg%%:*}; env=; [[ $cfg == *:* ]] && env=${cfg#*:}; [[ -x ./$bin ]] || continue
  for row in cuda:tf32+nlist cuda:f64+nlist; do
    f=$L/ncu_${bin}_${env:+variant_}${row//[^a-z0-9]/_}.csv
    env $env timeout 60 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes.sum -k regex:"$KERNELS" ./$bin bench --config bench --diamond 4 --backend $row --n-warmup 0 --n-time 1 > $f 2>/dev/null
    echo "$cfg $row rc=$?"
  done
done
sec memcheck
timeout 70 compute-sanitizer --tool memcheck --print-limit 20 ./ecenet bench --diamond 2 --backend cuda:tf32+nlist,cuda:f64+nlist --n-warmup 0 --n-time 1 > $L/mc.log 2>&1
echo "rc=$?"; grep -E "ERROR SUMMARY|Invalid" $L/mc.log | head -3
sec racecheck
timeout 110 compute-sanitizer --tool racecheck --print-limit 20 ./ecenet bench --config small --diamond 2 --backend cuda:f32+nlist --n-warmup 0 --n-time 1 > $L/rc.log 2>&1
echo "rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|hazard" $L/rc.log | head -3
sec "determinism cuda:f32+tf32"; cases cuda:f32+tf32 determinism det.log
sec done
