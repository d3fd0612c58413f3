#!/bin/bash
# ncu per-kernel durations (clocks not locked) of one forward + one joint
# step of $ROW (default cuda:f32), this build with and without $VARIANT
# ("ENV=value"), summed per kernel name: what a change moved, kernel by kernel.
# BIN=ecenet_base: the previous build (pack.sh BASE=) instead.
#   VARIANT=ECENET_FRAME_PACK=0 bash tools/device/ncu_ab.sh
source "$(dirname "$0")/env.sh"
cd $B; [[ -x ecenet_base || ! -f base.tar.xz ]] || tar -xJf base.tar.xz
for v in "" "$VARIANT"; do
  env $v timeout 200 ncu --clock-control none --csv --page raw --metrics gpu__time_duration.sum -c 600 \
    ./${BIN:-ecenet} bench --config bench --diamond 4 --backend ${ROW:-cuda:f32} --n-warmup 0 --n-time 1 > $OUT/ncu_${BIN}${v//=/_}.csv 2> $OUT/ncu_err.txt
  echo "=== ${v:-default} rc=$?"
  python3 - $OUT/ncu_${BIN}${v//=/_}.csv <<'PY'
import csv, sys, collections
lines = open(sys.argv[1]).read().splitlines()
lines = lines[next(i for i, l in enumerate(lines) if l.startswith('"ID"')):]
rows = list(csv.reader(lines))
h = rows[0]; ki = h.index("Kernel Name"); ti = h.index("gpu__time_duration.sum")
sc = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0}.get(rows[1][ti], 1e-6)
agg = collections.defaultdict(lambda: [0, 0.0]); tot = 0.0
for r in rows[2:]:
    try: t = float(r[ti].replace(',', '')) * sc
    except ValueError: continue
    n = r[ki].split("(")[0][:70]; agg[n][0] += 1; agg[n][1] += t; tot += t
for n, (c, t) in sorted(agg.items(), key=lambda x: -x[1][1])[:25]:
    print(f"{t:8.3f} ms {c:4d}x  {n}")
print(f"{tot:8.3f} ms total, {sum(c for c, _ in agg.values())} kernels")
PY
done
