#!/bin/bash
# device run 2 (final): tests, RealSpace scalar vs vector, bench rows, profiles, NVTX via ncu, sanitizer
cd "$(dirname "$0")/../.."
B=$PWD/.cudabuild
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
if ldd $B/check_cuda | grep -q "libcublas.*not found"; then
  L=$(find / -name "libcublas.so.13" -not -path "/proc/*" 2>/dev/null | head -1); export LD_LIBRARY_PATH=$(dirname $L):$LD_LIBRARY_PATH; fi
ldd $B/ecenet $B/cuda_bench_rs | grep "not found"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
export ECENET_TEST_DATA=$PWD/tests/data
for t in check_cuda check_options check_backends; do
  s=$SECONDS; echo "=== $t"; timeout 240 $B/$t > $OUT/$t.log 2>&1; echo "rc=$? $((SECONDS-s))s"; grep -E "%:|:F:|:E:|TF32 vs" $OUT/$t.log | tail -6
done
grep "cuda" $OUT/check_options.log | awk '{print $NF}' | sort -g | tail -1 | sed 's/^/check_options worst cuda lowmem diff: /'
cd $B
echo "=== RealSpace scalar vs vector"; s=$SECONDS
timeout 75 ./cuda_bench_rs --rs-only > $OUT/rs_bench.log 2>&1; echo "rc=$? $((SECONDS-s))s"; cut -c1-200 $OUT/rs_bench.log | head -45
echo "=== bench"; s=$SECONDS
timeout 100 ./ecenet bench --config bench --diamond 4 --backend cuda:tf32,cuda:f32,cuda:f64,cuda:tf32+lowmem,cuda:f32+lowmem,cuda:f64+lowmem --n-warmup 3 --n-time 10 2>&1 | tail -9
echo "--- lowmem chunk 22824"; timeout 40 ./ecenet bench --config bench --diamond 4 --backend cuda:tf32+lowmem,cuda:f32+lowmem --chunk-edges 22824 --n-warmup 2 --n-time 5 2>&1 | grep "^cuda"; echo "$((SECONDS-s))s"
echo "=== profiles"; s=$SECONDS
timeout 60 ./ecenet profile --config bench --diamond 4 --backend cuda --precision f32 --tf32 --n-warmup 3 --n-time 10 --op-profile --profile-rows 12 > $OUT/prof_tf32.txt 2>&1; echo rc=$?
timeout 60 ./ecenet profile --config bench --diamond 4 --backend cuda --precision f32 --tf32 --low-memory --n-warmup 2 --n-time 5 --op-profile --profile-rows 14 > $OUT/prof_tf32_lowmem.txt 2>&1; echo "rc=$? $((SECONDS-s))s"
grep -A4 "^totals" $OUT/prof_tf32.txt $OUT/prof_tf32_lowmem.txt | cut -c1-120
echo "=== NVTX via ncu"; s=$SECONDS
timeout 60 ncu --nvtx --nvtx-include "regex:layer_vjp/" -c 2 --section LaunchStats ./ecenet bench --config small --diamond 2 --backend cuda:f32 --n-warmup 0 --n-time 1 > $OUT/ncu_nvtx.txt 2>&1; echo "rc=$? $((SECONDS-s))s"
grep -E "==PROF==|\(|NVTX" $OUT/ncu_nvtx.txt | grep -v "^    " | head -12
echo "=== sanitizer (golden diamond through cuda)"; s=$SECONDS
cd ..; CK_FORK=no CK_RUN_CASE=golden ECENET_CUDA_GOLDEN=diamond timeout 90 compute-sanitizer --tool memcheck $B/check_cuda > $OUT/san.log 2>&1; echo "rc=$? $((SECONDS-s))s"; tail -3 $OUT/san.log
