#!/bin/bash
# Device check of a change that moves bits but must keep the accuracy: the
# test programs on cuda (check_cuda, check_options, check_backends' ops case
# with CB_CASE=ops, or every case: CB_CASE unset, not empty), then the bench rows of the previous build
# (pack.sh BASE=: ecenet_base), this build and this build with $VARIANT
# ("ENV=value": the same binary with an env switch) alternated twice, then
# compute-sanitizer memcheck of a small bench. About 5 minutes. RACE=1 adds
# a racecheck of a small bench; KERNELS=regex, ncu durations and DRAM bytes
# of the matching kernels for the three builds (TF32 and fp64 rows; CSVs in
# $OUT/ncu.tgz, read them here with tools/device/ncu_agg.py).
#   CB_CASE=ops VARIANT=ECENET_FRAME_PACK=0 bash tools/device/ab.sh
#   CB_CASE=ops RACE=1 KERNELS="wigner|frame_atom" VARIANT=ECENET_FRAME_ATOM_RB=0 bash tools/device/ab.sh
source "$(dirname "$0")/env.sh"
cd $B; [[ -x ecenet_base || ! -f base.tar.xz ]] || tar -xJf base.tar.xz
T0=$SECONDS
echo "== check_cuda"; timeout 120 ./check_cuda > $OUT/check_cuda.log 2>&1; echo "rc=$?"; tail -1 $OUT/check_cuda.log
echo "== check_options $((SECONDS-T0))s"; timeout 100 ./check_options > $OUT/check_options.log 2>&1; echo "rc=$?"; tail -1 $OUT/check_options.log
echo "== check_backends (cuda${CB_CASE:+, case $CB_CASE}) $((SECONDS-T0))s"
env ECENET_TEST_BACKEND=cuda ${CB_CASE:+CK_RUN_CASE=$CB_CASE} timeout ${CB_LIMIT:-250} ./check_backends > $OUT/check_backends.log 2>&1
echo "rc=$?"; grep -E "%:|:F:|:E:" $OUT/check_backends.log | cut -c1-300 | tail -8
echo "== bench, alternated $((SECONDS-T0))s"
for rep in 1 2; do for cfg in ecenet_base ecenet ${VARIANT:+ecenet:$VARIANT}; do
  bin=${cfg%%:*}; env=; [[ $cfg == *:* ]] && env=${cfg#*:}
  [[ -x ./$bin ]] || continue
  env $env timeout 90 ./$bin bench --config bench --diamond 4 --backend ${ROWS:-cuda:tf32+nlist,cuda:f32+nlist,cuda:f64+nlist} --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror|d[EF]" | sed "s/^/$cfg /"
done; done
echo "== memcheck $((SECONDS-T0))s"
timeout 200 compute-sanitizer --tool memcheck --print-limit 20 ./ecenet bench --diamond 2 --backend cuda:f32+nlist,cuda:f64+nlist --n-warmup 0 --n-time 1 > $OUT/memcheck.log 2>&1
echo "rc=$?"; grep -E "ERROR SUMMARY|Invalid" $OUT/memcheck.log | head -5
if [[ -n $RACE ]]; then
  echo "== racecheck $((SECONDS-T0))s"
  timeout 110 compute-sanitizer --tool racecheck --print-limit 20 ./ecenet bench --config small --diamond 2 --backend cuda:f32+nlist --n-warmup 0 --n-time 1 > $OUT/racecheck.log 2>&1
  echo "rc=$?"; grep -E "RACECHECK SUMMARY|hazard" $OUT/racecheck.log | head -3
fi
if [[ -n $KERNELS ]]; then
  echo "== ncu \"$KERNELS\" $((SECONDS-T0))s"
  N=/tmp/abncu; rm -rf $N; mkdir -p $N
  for cfg in ecenet_base ecenet ${VARIANT:+ecenet:$VARIANT}; do
    bin=${cfg%%:*}; env=; [[ $cfg == *:* ]] && env=${cfg#*:}
    [[ -x ./$bin ]] || continue
    for row in cuda:tf32+nlist cuda:f64+nlist; do
      env $env timeout 60 ncu --clock-control none --csv --metrics gpu__time_duration.sum,dram__bytes.sum -k regex:"$KERNELS" ./$bin bench --config bench --diamond 4 --backend $row --n-warmup 0 --n-time 1 > $N/${bin}${env:+_variant}_${row//[^a-z0-9]/_}.csv 2>/dev/null
      echo "$cfg $row rc=$?"
    done
  done
  tar -C $N -czf $OUT/ncu.tgz .
fi
echo "== done $((SECONDS-T0))s"
