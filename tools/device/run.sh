#!/bin/bash
# The GPU run behind doc/performance.md: tests, bench rows, profiles, sanitizer.
# Binaries: doc/gpu-runs.md steps 1-2 (.cudabuild/bin.tar.xz, carried). Logs into $OUT.
cd "$(dirname "$0")/../.."
B=$PWD/.cudabuild
[[ -f $B/bin.tar.xz && ! -x $B/ecenet ]] && tar -C $B -xJf $B/bin.tar.xz
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
if ldd $B/ecenet | grep -q "libcublas.*not found"; then
  L=$(find / -name "libcublas.so.13" -not -path "/proc/*" 2>/dev/null | head -1); export LD_LIBRARY_PATH=$(dirname $L):$LD_LIBRARY_PATH; fi
ldd $B/ecenet $B/check_cuda | grep "not found"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
export ECENET_TEST_DATA=$PWD/tests/data
for t in check_cuda check_options check_backends; do
  s=$SECONDS; echo "=== $t"; ECENET_TEST_BACKEND=cuda timeout ${TEST_LIMIT:-240} $B/$t > $OUT/$t.log 2>&1; echo "rc=$? $((SECONDS-s))s"
  grep -E "%:|:F:|:E:|TF32 vs|layers" $OUT/$t.log | cut -c1-240 | tail -6
done
grep "cuda" $OUT/check_options.log | awk '{print $NF}' | sort -g | tail -1 | sed 's/^/check_options worst cuda lowmem diff: /'
cd $B
ROWS=cuda:tf32,cuda:f32,cuda:f64,cuda:tf32+lowmem,cuda:f32+lowmem
echo "=== bench: RealSpace launch 1024 rows/8 warps vs 512/4, alternated"; s=$SECONDS
for rep in 1 2; do for cfg in 1024:8 512:4; do
  ECENET_RS_BLOCK=${cfg%:*} ECENET_RS_WARPS=${cfg#*:} timeout 60 ./ecenet bench --config bench --diamond 4 --backend $ROWS \
    --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/rs=$cfg /"
done; done; echo "$((SECONDS-s))s"
echo "=== bench: tensor-core layer kernels (ECENET_LAYER_TC) 0 / 1 / 2; first row fp64 (the accuracy reference)"; s=$SECONDS
for tc in 0 1 2; do ECENET_LAYER_TC=$tc timeout 60 ./ecenet bench --config bench --diamond 4 --backend cuda:f64,cuda:tf32,cuda:f32 \
  --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/tc=$tc /"; done; echo "$((SECONDS-s))s"
echo "=== profile (TF32)"; s=$SECONDS
timeout 60 ./ecenet profile --config bench --diamond 4 --backend cuda --precision f32 --tf32 --n-warmup 3 --n-time 10 --op-profile --profile-rows 14 > $OUT/prof_tf32.txt 2>&1; echo "rc=$? $((SECONDS-s))s"
grep -A5 "^totals" $OUT/prof_tf32.txt | cut -c1-120
echo "=== memcheck: tensor-core kernels (bench diamond 2) and golden diamond"; s=$SECONDS
ECENET_LAYER_TC=2 timeout 90 compute-sanitizer --tool memcheck ./ecenet bench --config bench --diamond 2 --backend cuda:tf32,cuda:f32 --n-warmup 0 --n-time 1 > $OUT/memcheck_tc.log 2>&1; echo "rc=$?"; tail -1 $OUT/memcheck_tc.log
cd ..; CK_FORK=no CK_RUN_CASE=golden ECENET_CUDA_GOLDEN=diamond timeout 90 compute-sanitizer --tool memcheck $B/check_cuda > $OUT/san.log 2>&1; echo "rc=$? $((SECONDS-s))s"; tail -1 $OUT/san.log
