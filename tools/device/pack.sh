#!/bin/bash
# Dev machine (no GPU): build the CUDA configuration in $O (default /tmp/bldc),
# the test programs, tools/device/cuda_bench.c and gemm_bench.cu, and pack
# what the device needs into .cudabuild/bin.tar.xz (doc/gpu-runs.md steps 1-2).
#   bash tools/device/pack.sh
set -e
cd "$(dirname "$0")/../.."
R=$PWD; O=${O:-/tmp/bldc}; P=/tmp/cbpack
mkdir -p $O/rsb
[ -f $O/Makefile ] || (cd $O && $R/configure --with-cuda -q)
make -C $O -j2 > $O/pack_make.log 2>&1 && make -C $O -j2 check TESTS= >> $O/pack_make.log 2>&1 \
  || { tail -30 $O/pack_make.log; exit 1; }
grep -i "warning" $O/pack_make.log && echo "(warnings above)" || true
CF="-std=c99 -O2 -Wall -Wextra -Wpedantic -DECENET_HAVE_CUDA -I$R/include -I$R/src/core -I$R/src/cuda -I$R/src/cli -isystem /usr/local/cuda/include"
gcc $CF -c $R/tools/device/cuda_bench.c -o $O/rsb/cuda_bench.o
gcc $CF -c $R/src/cli/synth.c -o $O/rsb/synth.o
rm -rf $P && mkdir -p $P/lib
gcc -fopenmp -o $P/cuda_bench $O/rsb/cuda_bench.o $O/rsb/synth.o $O/.libs/libecenet_internal.a \
  -lblis -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcublas -lcudart -lstdc++ -lm -lcjson -fopenmp
nvcc -O2 -arch=sm_90 -o $P/gemm_bench $R/tools/device/gemm_bench.cu -lcublas \
  -Xlinker -rpath,/usr/local/cuda/lib64 || echo "gemm_bench not built (optional)"
nvcc -O2 -arch=sm_90 -std=c++17 -o $P/split_bench $R/tools/device/split_bench.cu -lcublas \
  -Xlinker -rpath,/usr/local/cuda/lib64 || echo "split_bench not built (optional)"
nvcc -O2 -arch=sm_90 -std=c++17 -o $P/x3_check $R/tools/device/x3_check.cu \
  -Xlinker -rpath,/usr/local/cuda/lib64 || echo "x3_check not built (optional)"
nvcc -O2 -arch=sm_90 -std=c++17 -o $P/lt_bench $R/tools/device/lt_bench.cu -lcublasLt -lcublas \
  -Xlinker -rpath,/usr/local/cuda/lib64 || echo "lt_bench not built (optional)"
nvcc -O2 -gencode arch=compute_90a,code=sm_90a -o $P/wgmma_probe $R/tools/device/wgmma_probe.cu \
  -Xlinker -rpath,/usr/local/cuda/lib64 || echo "wgmma_probe not built (optional)"
cp $O/ecenet $O/tests/check_options $O/tests/check_cuda $O/tests/check_backends $P/
strip -s $P/ecenet $P/check_* $P/cuda_bench
cp -L /usr/lib/x86_64-linux-gnu/{libblis.so.4,libsubunit.so.0,libcjson.so.1} $P/lib/
mkdir -p .cudabuild && rm -f .cudabuild/bin.tar.xz && tar -C $P -cJf .cudabuild/bin.tar.xz .
ls -la .cudabuild/bin.tar.xz
# BASE=dir (a previous pack unpacked there): its ecenet (and cuda_bench, if
# there) travel as ecenet_base (cuda_bench_base) in .cudabuild/base.tar.xz,
# for the alternated comparisons in iter.sh, ab.sh and x3.sh
if [[ -n $BASE ]]; then
  rm -rf /tmp/cbbase && mkdir -p /tmp/cbbase && cp $BASE/ecenet /tmp/cbbase/ecenet_base
  [[ -x $BASE/cuda_bench ]] && cp $BASE/cuda_bench /tmp/cbbase/cuda_bench_base
  tar -C /tmp/cbbase -cJf .cudabuild/base.tar.xz . && ls -la .cudabuild/base.tar.xz
fi
