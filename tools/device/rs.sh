#!/bin/bash
# RealSpace vector kernels: device run (scalar vs vector timing, tests). Logs into $OUT.
#   on the GPU machine (cwd anywhere):  bash tools/device/rs.sh
#   RS_NCU=1 bash tools/device/rs.sh      adds an ncu pass over the rs_* kernels (+1-2 min)
#   bash tools/device/rs.sh build         (dev machine) rebuilds the three binaries as below
# Expected: about 2-3 minutes; every step has its own timeout, the whole stays under 4 min.
#
# The binaries were built on the dev machine (no GPU) with exactly:
#   mkdir -p /tmp/bldrs && cd /tmp/bldrs && /work/main/configure --with-cuda -q && make -j2 \
#     && make -j2 check TESTS=
#   cp /tmp/bldrs/tests/check_backends /work/main/.cudabuild/check_backends_rs
#   cp /tmp/bldrs/tests/check_cuda /work/main/.cudabuild/check_cuda_rs
#   R=/work/main; B=/tmp/bldrs; mkdir -p $B/rsb
#   CF="-std=c99 -O2 -g -Wall -Wextra -Wpedantic -DECENET_HAVE_CUDA -I$R/include -I$R/src/core \
#     -I$R/src/cuda -I$R/src/cli -isystem /usr/local/cuda/include"
#   gcc $CF -c $R/tools/device/cuda_bench.c -o $B/rsb/cuda_bench.o
#   gcc $CF -c $R/src/cli/synth.c -o $B/rsb/synth.o
#   gcc -fopenmp -o $R/.cudabuild/cuda_bench_rs $B/rsb/cuda_bench.o $B/rsb/synth.o \
#     $B/.libs/libecenet_internal.a -lblis -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 \
#     -lcublas -lcudart -lstdc++ -lm -lcjson -fopenmp
#   strip --strip-debug $R/.cudabuild/{check_backends_rs,check_cuda_rs,cuda_bench_rs}
#     (-1.1 MB each, so that .cudabuild stays under the 64 MiB carry limit; or carry only
#      .cudabuild/{rs.sh,lib,cuda_bench_rs,check_cuda_rs,check_backends_rs})
cd "$(dirname "$0")/../.."
B=$PWD/.cudabuild

if [[ $1 == build ]]; then
  set -e
  R=$PWD; O=/tmp/bldrs
  mkdir -p $O/rsb
  if [ ! -f $O/Makefile ]; then (cd $O && $R/configure --with-cuda -q); fi
  make -C $O -j2 > $O/rs_make.log 2>&1 && make -C $O -j2 check TESTS= >> $O/rs_make.log 2>&1
  if grep -i "warning" $O/rs_make.log; then echo "(warnings above)"; fi
  cp $O/tests/check_backends $B/check_backends_rs
  cp $O/tests/check_cuda $B/check_cuda_rs
  CF="-std=c99 -O2 -g -Wall -Wextra -Wpedantic -DECENET_HAVE_CUDA -I$R/include -I$R/src/core -I$R/src/cuda -I$R/src/cli -isystem /usr/local/cuda/include"
  gcc $CF -c $R/tools/device/cuda_bench.c -o $O/rsb/cuda_bench.o
  gcc $CF -c $R/src/cli/synth.c -o $O/rsb/synth.o
  gcc -fopenmp -o $B/cuda_bench_rs $O/rsb/cuda_bench.o $O/rsb/synth.o $O/.libs/libecenet_internal.a \
    -lblis -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcublas -lcudart -lstdc++ -lm -lcjson -fopenmp
  strip --strip-debug $B/check_backends_rs $B/check_cuda_rs $B/cuda_bench_rs
  echo "built $B/check_backends_rs $B/check_cuda_rs $B/cuda_bench_rs"
  exit 0
fi

OUT=${OUT:-/tmp/rs_out}
mkdir -p $OUT
t0=$SECONDS
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
if ldd $B/check_cuda_rs | grep -q "libcu.*not found"; then
  L=$(find / -name "libcublas.so.13" -not -path "/proc/*" 2>/dev/null | head -1)
  export LD_LIBRARY_PATH=$(dirname $L):$LD_LIBRARY_PATH
fi
ldd $B/check_cuda_rs $B/check_backends_rs $B/cuda_bench_rs | grep "not found"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
export ECENET_TEST_DATA=$PWD/tests/data
left() { echo $((230 - (SECONDS - t0))); }

echo "=== RealSpace: scalar vs vector (cuda_bench_rs --rs-only)"
timeout 75 $B/cuda_bench_rs --rs-only > $OUT/rs_bench.log 2>&1
echo "rc=$? ($((SECONDS - t0)) s)"
cut -c1-300 $OUT/rs_bench.log

echo "=== check_cuda_rs (default vector mode)"
t1=$SECONDS
timeout 45 $B/check_cuda_rs > $OUT/check_cuda_rs.log 2>&1
echo "rc=$? ($((SECONDS - t1)) s)"
grep -i "fail\|error\|bitwise\|%:" $OUT/check_cuda_rs.log | tail -8

echo "=== check_backends_rs, case ops (every RealSpace / layer variant against ref)"
t1=$SECONDS
lim=$(left); [ $lim -gt 110 ] && lim=110
timeout $lim env CK_RUN_CASE=ops $B/check_backends_rs > $OUT/check_backends_rs_ops.log 2>&1
echo "rc=$? ($((SECONDS - t1)) s, limit $lim)"
grep "^cuda\|:F:\|:E:" $OUT/check_backends_rs_ops.log | head -30
tail -1 $OUT/check_backends_rs_ops.log

lim=$(left)
if [ $lim -gt 25 ]; then
  echo "=== check_backends_rs, case golden (whole models against ref)"
  t1=$SECONDS
  timeout $lim env CK_RUN_CASE=golden $B/check_backends_rs > $OUT/check_backends_rs_golden.log 2>&1
  echo "rc=$? ($((SECONDS - t1)) s, limit $lim)"
  grep ":F:\|:E:" $OUT/check_backends_rs_golden.log | head -10
  tail -1 $OUT/check_backends_rs_golden.log
else
  echo "=== check_backends_rs golden skipped (time)"
fi

if [[ $RS_NCU == 1 ]] && which ncu > /dev/null 2>&1; then
  echo "=== ncu (rs_* kernels, one launch each: scalar then vector per variant; f32 then f64)"
  timeout 150 ncu --clock-control none --kernel-name "regex:rs_(fwd|vjp)_v?k" \
    --section SpeedOfLight --section Occupancy --section LaunchStats \
    $B/cuda_bench_rs --rs-ncu > $OUT/rs_ncu.txt 2>&1
  echo "rc=$?"
  grep -E "^  void|^  rs_|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occ" \
    $OUT/rs_ncu.txt | head -160
fi
echo "total $((SECONDS - t0)) s"
