#!/bin/bash
# Device check of a change that must not move any bit (a refactor, a thread
# remapping with the same sums): ecenet compute on the golden structures in
# fp64, fp32 and TF32 with this build and the previous one (pack.sh BASE=,
# ecenet_base), outputs compared with cmp; then check_cuda, check_backends
# and check_options with ECENET_TEST_BACKEND=cuda. About 5 minutes.
#   bash tools/device/verify.sh      (on the device, after pack.sh here)
source tools/device/env.sh
cd $B; [[ -x ecenet_base ]] || tar -xJf base.tar.xz
export ECENET_TEST_BACKEND=cuda
T0=$(date +%s); R=$(dirname $B)
for C in diamond ethanol options; do for P in "f64" "f32" "f32 --tf32"; do
  for X in ecenet ecenet_base; do ./$X compute -m $R/tests/data/golden/$C.model.safetensors -b cuda -p $P $R/tests/data/golden_xyz/$C.extxyz -o /tmp/o_$X.txt >/dev/null 2>&1 || echo "FAIL $X $C $P"; done
  cmp -s /tmp/o_ecenet.txt /tmp/o_ecenet_base.txt && echo "same $C $P" || echo "DIFFER $C $P"
done; done
echo "== check_cuda $(($(date +%s)-T0))"; ./check_cuda 2>&1 | tail -1
echo "== check_backends $(($(date +%s)-T0))"; timeout 280 ./check_backends > $OUT/cb.log 2>&1; echo rc=$?; grep -E "%:|:F:|:E:" $OUT/cb.log | tail -5
echo "== check_options $(($(date +%s)-T0))"; timeout 100 ./check_options 2>&1 | tail -1
echo "== done $(($(date +%s)-T0))"
