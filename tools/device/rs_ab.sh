#!/bin/bash
# RealSpace A/B on the device: the standalone kernels (cuda_bench --rs-only,
# E = 44,000, the issue's shape) of the previous build (cuda_bench_base, pack.sh
# BASE=) and of this one, alternated twice; then the bench rows of both, with
# this build's $VARIANT ("ENV=value") as a third column when set. NEW_ENV and
# NEW_ARGS go to this build's cuda_bench only. H200_ONLY=1: stop at once on
# any other card (the RealSpace targets are set on the H200). Logs into
# $OUT. About 90 s.
#   NEW_ARGS=--rs-sym VARIANT=ECENET_RS_SYM=0 bash tools/device/rs_ab.sh
source "$(dirname "$0")/env.sh"
[[ -z $H200_ONLY ]] || nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 \
  || { echo "not an H200: stop"; exit 3; }
cd $B; [[ -x ecenet_base || ! -f base.tar.xz ]] || tar -xJf base.tar.xz
T0=$SECONDS
RS="--rs-only --rs-no-sweep --rs-sin0 --rs-edges 44000 --rs-reps 31"
for rep in 1 2; do
  for bin in cuda_bench_base cuda_bench; do
    [[ -x $bin ]] || continue
    a=; e=; [[ $bin == cuda_bench ]] && { a=$NEW_ARGS; e=$NEW_ENV; }
    env $e timeout 60 ./$bin $RS $a > $OUT/rs_${bin}_$rep.txt 2>&1
    echo "--- $bin $e $a rep $rep rc=$? $((SECONDS-T0))s"
    grep -E "^ +(fwd|vjp)|device copy" $OUT/rs_${bin}_$rep.txt | cut -c1-160
  done
done
echo "== bench, alternated $((SECONDS-T0))s"
CFGS=(ecenet)
[[ -x ecenet_base ]] && CFGS=(ecenet_base "${CFGS[@]}")
[[ -n $VARIANT ]] && CFGS+=("ecenet $VARIANT")
for rep in 1 2; do
  for cfg in "${CFGS[@]}"; do
    set -- $cfg; bin=$1; shift
    env "$@" timeout 90 ./$bin bench --config bench --diamond 4 --backend ${ROWS:-cuda:f64+nlist,cuda:f32+nlist,cuda:tf32+nlist} --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/$cfg | /"
  done
done
echo "== done $((SECONDS-T0))s"
