#!/bin/bash
# Stage chunks (ECENET_STAGE_CHUNK, step.c) in one call (about 7 minutes on
# an H100): check_cuda; the bench rows (fp64, TF32) of the default and of
# each setting in $VARIANTS, alternated twice; check_options (the stage
# chunks against all edges at once, about 100 s); the golden cases on the
# TF32 and fp64 rows with $GOLDEN set (golden steps are traced, which turns
# stage chunks off: this checks the other switches $GOLDEN may hold); the
# ops case on cuda:f64 (about 150 s); memcheck of a small bench with
# $GOLDEN on (which stage chunks do reach); on an H200, then the target rows
# (standalone RealSpace, the three bench rows). LM="0 2048" adds the
# low-memory rows over --chunk-edges. Log in $OUT/chunk.log. The
# twenty-seventh session ran it with two more switches in $VARIANTS
# (ECENET_LAYER_CHUNK, ECENET_FRAME_PIPE, since removed; doc/performance.md).
#   bash tools/device/chunk.sh            (on the device, after pack.sh here)
source "$(dirname "$0")/env.sh"
cd $B; T0=$SECONDS; L=$OUT/chunk.log
G=${GOLDEN:-ECENET_STAGE_CHUNK=2048}
say() { echo "$*" | tee -a $L; }
say "== check_cuda"; timeout 60 ./check_cuda > $OUT/check_cuda.log 2>&1; say "rc=$? $(tail -1 $OUT/check_cuda.log)"
say "== bench, alternated $((SECONDS-T0))s"
for rep in 1 2; do for v in default ${VARIANTS:-ECENET_STAGE_CHUNK=0 ECENET_STAGE_CHUNK=4096 ECENET_STAGE_CHUNK=16384}; do
  e=$v; [[ $v == default ]] && e=
  env $e timeout 60 ./ecenet bench --config bench --diamond 4 --backend ${ROWS:-cuda:f64+nlist,cuda:tf32+nlist} --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/[$v] /" | tee -a $L
done; done
for c in $LM; do
  timeout 60 ./ecenet bench --config bench --diamond 4 --backend cuda:f64+nlist,cuda:tf32+nlist,cuda:tf32+nlist+lowmem --chunk-edges $c --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda.*lowmem|rror" | sed "s/^/[lowmem --chunk-edges $c] /" | tee -a $L
done
say "== check_options $((SECONDS-T0))s"
timeout 200 ./check_options > $OUT/check_options.log 2>&1; say "rc=$?: $(tail -1 $OUT/check_options.log)"
grep "cuda.*stage chunk" $OUT/check_options.log | tee -a $L
say "== golden with $G $((SECONDS-T0))s"
for row in cuda:f32+tf32 cuda:f64; do
  env $G ECENET_TEST_BACKEND=$row CK_RUN_CASE=golden timeout 100 ./check_backends > $OUT/golden_${row//[^a-z0-9]/_}.log 2>&1
  say "$row rc=$?: $(grep -E "%:" $OUT/golden_${row//[^a-z0-9]/_}.log | tail -1)"
  grep -E ":F:|:E:" $OUT/golden_${row//[^a-z0-9]/_}.log | head -3 | cut -c1-300 | tee -a $L
done
say "== ops on cuda:f64 $((SECONDS-T0))s"
ECENET_TEST_BACKEND=cuda:f64 CK_RUN_CASE=ops timeout ${OPS_LIMIT:-240} ./check_backends > $OUT/ops_f64.log 2>&1
say "rc=$?: $(grep -E "%:" $OUT/ops_f64.log | tail -1)"; grep -E ":F:|:E:" $OUT/ops_f64.log | head -3 | cut -c1-300 | tee -a $L
say "== memcheck with $G $((SECONDS-T0))s"
env $G timeout 60 compute-sanitizer --tool memcheck --print-limit 20 ./ecenet bench --diamond 2 --backend cuda:tf32+nlist,cuda:f64+nlist --n-warmup 0 --n-time 1 > $OUT/memcheck.log 2>&1
say "rc=$? $(grep -E "ERROR SUMMARY" $OUT/memcheck.log | head -1)"; grep -E "Invalid" $OUT/memcheck.log | head -3 | tee -a $L
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then # the target rows
  say "== H200: RealSpace standalone $((SECONDS-T0))s"
  timeout 60 ./cuda_bench --rs-only --rs-no-sweep --rs-sin0 --rs-sym --rs-edges 44000 --rs-reps 31 2>&1 | tail -25 | tee -a $L
  say "== H200: bench, three rows $((SECONDS-T0))s"
  timeout 90 ./ecenet bench --config bench --diamond 4 --backend cuda:f64+nlist,cuda:f32+nlist,cuda:tf32+nlist --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | tee -a $L
fi
say "== done $((SECONDS-T0))s"
