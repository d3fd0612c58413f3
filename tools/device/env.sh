# Sourced by the device scripts: unpack the carried binaries (.cudabuild,
# doc/gpu-runs.md), find the shared libraries, point the tests at the data.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
B=$PWD/.cudabuild
[[ -f $B/bin.tar.xz && ! -x $B/ecenet ]] && tar -C $B -xJf $B/bin.tar.xz
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
if ldd $B/ecenet | grep -q "libcublas.*not found"; then
  L=$(find / -name "libcublas.so.13" -not -path "/proc/*" 2>/dev/null | head -1)
  export LD_LIBRARY_PATH=$(dirname $L):$LD_LIBRARY_PATH
fi
ldd $B/ecenet | grep "not found"
export ECENET_TEST_DATA=$PWD/tests/data
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
