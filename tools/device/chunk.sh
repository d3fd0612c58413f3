#!/bin/bash
# Chunked layers, for the L2 cache: the bench rows for each chunk size,
# alternated twice in one call (fp64 and TF32 rows, or ROWS=...; 0 = all
# edges at once, the default) of ECENET_LAYER_CHUNK (cuda_layers.cu: each
# layer's two kernels chunk by chunk), ECENET_STAGE_CHUNK (step.c: a
# stage's layers chunk by chunk) and the low-memory mode's --chunk-edges;
# then the golden cases on the TF32 and fp64 rows with both switches at one
# chunk size, and check_options. About 3 minutes. Log in $OUT/chunk.log.
#   bash tools/device/chunk.sh            (on the device, after pack.sh here)
#   SIZES="0 2048 4096" GOLDEN_CHUNK=2048 bash tools/device/chunk.sh
source "$(dirname "$0")/env.sh"
cd $B; T0=$SECONDS; L=$OUT/chunk.log
for rep in 1 2; do for c in ${SIZES:-0 2048 8192}; do
  ECENET_LAYER_CHUNK=$c timeout 60 ./ecenet bench --config bench --diamond 4 --backend ${ROWS:-cuda:f64+nlist,cuda:tf32+nlist} --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/chunk=$c /" | tee -a $L
done; done
# ECENET_STAGE_CHUNK (step.c): the default mode runs a stage's layers
# chunk by chunk, the features of a chunk staying in L2 across its layers
echo "== ECENET_STAGE_CHUNK $((SECONDS-T0))s" | tee -a $L
for rep in 1 2; do for c in ${SC_SIZES:-0 2048 8192}; do
  ECENET_STAGE_CHUNK=$c timeout 60 ./ecenet bench --config bench --diamond 4 --backend cuda:f64+nlist,cuda:tf32+nlist --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda|rror" | sed "s/^/stage_chunk=$c /" | tee -a $L
done; done
# the low-memory mode runs a stage's layers on one chunk of edges at a
# time, its forward through one Z buffer: with chunks that fit in L2, an
# L2-resident stage (its joint step recomputes the forward per chunk)
echo "== low memory, --chunk-edges $((SECONDS-T0))s" | tee -a $L
for rep in 1 2; do for c in ${LM_SIZES:-0 2048}; do
  timeout 60 ./ecenet bench --config bench --diamond 4 --backend cuda:f64+nlist,cuda:tf32+nlist,cuda:tf32+nlist+lowmem --chunk-edges $c --n-warmup 3 --n-time 10 2>&1 | grep -E "^cuda.*lowmem|rror" | sed "s/^/lm_chunk=$c /" | tee -a $L
done; done
echo "== golden, ECENET_LAYER_CHUNK = ECENET_STAGE_CHUNK = ${GOLDEN_CHUNK:-2048} $((SECONDS-T0))s" | tee -a $L
for row in cuda:f32+tf32 cuda:f64; do
  ECENET_LAYER_CHUNK=${GOLDEN_CHUNK:-2048} ECENET_STAGE_CHUNK=${GOLDEN_CHUNK:-2048} ECENET_TEST_BACKEND=$row CK_RUN_CASE=golden timeout 100 ./check_backends > /tmp/chunk_golden.log 2>&1
  echo "$row rc=$?: $(grep -E "%:" /tmp/chunk_golden.log | tail -1)" | tee -a $L
  grep -E ":F:|:E:" /tmp/chunk_golden.log | head -3 | cut -c1-300 | tee -a $L
done
echo "== check_options (ECENET_STAGE_CHUNK against all edges at once) $((SECONDS-T0))s" | tee -a $L
timeout 90 ./check_options > $OUT/check_options.log 2>&1; echo "rc=$?: $(tail -1 $OUT/check_options.log)" | tee -a $L
grep "cuda.*stage chunk" $OUT/check_options.log | tee -a $L
echo "== done $((SECONDS-T0))s" | tee -a $L
