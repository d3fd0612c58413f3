#!/bin/bash
# The wgmma fused layer forward (ECENET_LAYER_TC=3, src/cuda/cuda_layer_wg.cu)
# on the device: the op tests of the TF32 row (every layer case with modes
# 0, 2 and 3; the kernels must run exactly where they apply), the golden
# cases through mode GOLDEN_MODE (default 3), then the bench rows with
# MODES (default "0 1 3": cuBLAS + RealSpace, mma.sync fused, wgmma)
# alternated twice, an fp64 row first as the accuracy reference; then a
# per-op profile of the TF32 step in PROFILE_MODES (default "0 3", empty:
# none; about 28 s a run); MEMCHECK=1: memcheck of a small bench through
# GOLDEN_MODE; NCU=1:
# ncu of one kernel of mode NCU_MODE (default 3); NCU_SOURCE=1: ncu's
# per-instruction source view of that kernel into $OUT/ncu_source.csv.gz
# (read it here with tools/device/ncu_source.py). About 3-5 minutes.
# An entry of MODES, PROFILE_MODES or GOLDEN_MODE may carry more environment after
# commas: "3,ECENET_RS_SYM=0" runs mode 3 with ECENET_RS_SYM=0.
#   MODES="0 3" PROFILE_MODES=3 bash tools/device/wg.sh
source "$(dirname "$0")/env.sh"
cd $B
T0=$SECONDS
echo "== check_backends ops, cuda:f32+tf32 $((SECONDS-T0))s"
ECENET_TEST_BACKEND=cuda:f32+tf32 CK_RUN_CASE=ops timeout ${CB_LIMIT:-200} ./check_backends > $OUT/cb_ops.log 2>&1
echo "rc=$?"; grep -E "%:|:F:|:E:" $OUT/cb_ops.log | cut -c1-400 | tail -4
G=${GOLDEN_MODE:-3}; gx=; [[ $G == *,* ]] && gx=${G#*,}
echo "== check_backends golden, cuda:f32+tf32, ECENET_LAYER_TC=$G $((SECONDS-T0))s"
env ECENET_LAYER_TC=${G%%,*} ${gx//,/ } ECENET_TEST_BACKEND=cuda:f32+tf32 CK_RUN_CASE=golden timeout 120 ./check_backends > $OUT/cb_golden.log 2>&1
echo "rc=$?"; grep -E "%:|:F:|:E:" $OUT/cb_golden.log | cut -c1-300 | tail -4
if [[ -n $MEMCHECK ]]; then
  echo "== memcheck, ECENET_LAYER_TC=$G $((SECONDS-T0))s"
  env ECENET_LAYER_TC=${G%%,*} ${gx//,/ } timeout 90 compute-sanitizer --tool memcheck --print-limit 20 ./ecenet bench --diamond 2 --backend cuda:tf32+nlist --n-warmup 0 --n-time 1 > $OUT/memcheck.log 2>&1
  echo "rc=$?"; grep -E "ERROR SUMMARY|Invalid" $OUT/memcheck.log | head -3
fi
echo "== bench, alternated $((SECONDS-T0))s"
for rep in 1 2; do
  for cfg in ${MODES:-0 1 3}; do
    m=${cfg%%,*}; x=; [[ $cfg == *,* ]] && x=${cfg#*,}
    env ECENET_LAYER_TC=$m ${x//,/ } timeout 90 ./ecenet bench --config bench --diamond 4 --backend ${ROWS:-cuda:f64+nlist,cuda:tf32+nlist} --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/TC=$cfg | /"
  done
done
echo "== profile $((SECONDS-T0))s"
for cfg in ${PROFILE_MODES-0 3}; do
  m=${cfg%%,*}; x=; [[ $cfg == *,* ]] && x=${cfg#*,}; f=$OUT/profile_${cfg//[^A-Za-z0-9]/_}.txt
  env ECENET_LAYER_TC=$m ${x//,/ } timeout 90 ./ecenet profile --config bench --diamond 4 --backend cuda --precision f32 --tf32 --n-warmup 2 --n-time 5 --op-profile > $f 2>&1
  echo "TC=$cfg rc=$?"; grep -E "layer_fwd|layer_vjp|step" $f | head -6
done
if [[ -n $NCU ]]; then
  echo "== ncu, one wgmma layer kernel $((SECONDS-T0))s"
  ECENET_LAYER_TC=${NCU_MODE:-3} timeout 120 ncu --clock-control none -k regex:layer_w -c 1 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats \
    ./ecenet bench --config bench --diamond 4 --backend cuda:tf32+nlist --n-warmup 0 --n-time 1 > $OUT/ncu_wg.txt 2>&1
  echo "rc=$?"; grep -E "Duration|Throughput|Busy|Bank|Achieved Occ|Registers|Stall|Issued Warp|No Eligible" $OUT/ncu_wg.txt | head -30
fi
if [[ -n $NCU_SOURCE ]]; then
  echo "== ncu source view, one wgmma layer kernel $((SECONDS-T0))s"
  ECENET_LAYER_TC=${NCU_MODE:-3} timeout 150 ncu --clock-control none -k regex:layer_w -s 2 -c 1 \
    --section SourceCounters --page source --csv --print-source sass \
    ./ecenet bench --config bench --diamond 4 --backend cuda:tf32+nlist --n-warmup 0 --n-time 1 > /tmp/ncu_source.csv 2>&1
  echo "rc=$?"; gzip -c /tmp/ncu_source.csv > $OUT/ncu_source.csv.gz
fi
echo "== done $((SECONDS-T0))s"
