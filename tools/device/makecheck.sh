#!/bin/bash
# Device: the README's build and test commands, run there as a user would:
# `./configure --with-cuda && make && make check`, built on the device from
# the travelled tree (no binaries carried). The image has gcc, make and
# nvcc but not Check, BLIS, cJSON nor libtool's m4 files, so those come from
# .cudabuild/mkcheck.tar.xz (tools/device/pack_check.sh, here). Logs go to
# $OUT/makecheck.tgz (configure, make, every test's log, test-suite.log).
#   bash tools/device/makecheck.sh        (carry .cudabuild)
# MK_TIMEOUT=seconds bounds `make check` (default 480), MK_JOBS is make's -j
# (16). SPLIT=1: check_backends as its four cases at once beside the other
# programs (below).
cd "$(dirname "$0")/../.."
R=$PWD; D=/tmp/ecdeps; W=/tmp/mkc; BLD=/tmp/bld; L=/tmp/mklogs
rm -rf $D $W $BLD $L && mkdir -p $D $W $BLD $L
T0=$SECONDS
save() { cp $BLD/test-suite.log $L/ 2>/dev/null; cp $BLD/tests/*.log $L/ 2>/dev/null
         tar -C $L -czf ${OUT:-/tmp}/makecheck.tgz .; }
tar -C $W -xJf .cudabuild/mkcheck.tar.xz && mv $W/deps/* $D/
sed -i "s|@PREFIX@|$D|" $D/lib/pkgconfig/*.pc
tar -xf $W/auto/auto.tar
# the travelled sources are newer than the carried autotools outputs: date
# these after them, inputs first, so that make does not rerun autotools
touch m4/*.m4 build-aux/*; sleep 1; touch aclocal.m4; sleep 1; touch configure Makefile.in
# C_INCLUDE_PATH, not CPATH: the carried headers are then system headers, as
# under /usr/include here (with CPATH, gcc 13 printed 950 warning lines from
# inside blis.h)
export PATH=/usr/local/cuda/bin:$PATH C_INCLUDE_PATH=$D/include LIBRARY_PATH=$D/lib \
  LD_LIBRARY_PATH=$D/lib:$LD_LIBRARY_PATH PKG_CONFIG_PATH=$D/lib/pkgconfig
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -2
cd $BLD
echo "== configure --with-cuda"
$R/configure --with-cuda > $L/configure.log 2>&1 || { tail -30 $L/configure.log; save; exit 1; }
sed -n '/backends:/,/tests:/p' $L/configure.log
echo "== make -j${MK_JOBS:-16} ($((SECONDS-T0)) s)"
make -j${MK_JOBS:-16} > $L/make.log 2>&1 || { grep -E "error|Error" $L/make.log | head -30; save; exit 1; }
grep -c -i "warning" $L/make.log | sed 's/^/warning lines: /'
echo "== make check ($((SECONDS-T0)) s)"
# every test program that runs OpenMP would otherwise start 16 threads while
# make runs up to 11 of them at once: check_physics' invariance case timed
# out (60 s; 14 s alone on 2 cores) so in the twenty-eighth session (the
# limits are hang guards of 300 s now, TU_HANG_GUARD_S; fewer threads still
# finish sooner)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
if [[ -z $SPLIT ]]; then
  timeout ${MK_TIMEOUT:-480} make -j${MK_JOBS:-16} check > $L/check.log 2>&1; rc=$?
else
  # SPLIT=1: check_backends, the longest program with a GPU (more than 9
  # minutes on an H100 machine, its ops case more than 7 before the
  # thirty-first session's changes), runs as its four Check cases at once next
  # to `make check` of the other programs, so that the whole suite fits in
  # one device call; its logs are $L/cb_<case>.log
  make -j${MK_JOBS:-16} check TESTS= > $L/build_tests.log 2>&1 || { tail -20 $L/build_tests.log; save; exit 1; }
  others=tests/check_cli.sh # the shell test (in the source tree) and every test program but one
  for f in tests/check_*; do
    [[ -x $f && $f != *.* && $f != tests/check_backends ]] && others="$others $f"
  done
  echo "beside check_backends' cases: $others"
  for c in ops golden guard determinism; do
    (CK_RUN_CASE=$c ECENET_TEST_DATA=$R/tests/data timeout ${MK_TIMEOUT:-480} ./tests/check_backends \
       > $L/cb_$c.log 2>&1; echo "check_backends case $c rc=$?" > $L/cb_$c.rc) &
  done
  timeout ${MK_TIMEOUT:-480} make -j${MK_JOBS:-16} check TESTS="$others" > $L/check.log 2>&1; rc=$?
  wait
  for c in ops golden guard determinism; do
    cat $L/cb_$c.rc; grep -E "^[0-9]+%: Checks|:[EF]:" $L/cb_$c.log | cut -c1-300 | head -5
    grep -q "rc=0" $L/cb_$c.rc || rc=1
  done
fi
grep -E "^(PASS|FAIL|SKIP|ERROR|XFAIL|XPASS):|^# " $L/check.log
echo "make check rc=$rc after $((SECONDS-T0)) s"
for t in tests/check_*.log; do grep -H -E "^[0-9]+%: Checks" $t; done
save
exit $rc
