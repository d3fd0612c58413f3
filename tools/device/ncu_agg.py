#!/usr/bin/env python3
"""Per-kernel totals of an ncu metrics CSV (here, after a device run). Input:
  ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes.sum --csv PROGRAM > f.csv
(tools/device/survey.sh writes it as ncu_all.csv). Prints, slowest first:
total ms, launches, µs a launch, DRAM GB/s over the kernel's time, name.
  python3 tools/device/ncu_agg.py f.csv [ROWS]"""
import collections
import csv
import re
import sys

TIME = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
BYTES = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}

rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
h = rows[0]
ik, im, iv, iu, iid = (h.index(k) for k in ("Kernel Name", "Metric Name", "Metric Value",
                                            "Metric Unit", "ID"))
per = collections.defaultdict(dict)
for r in rows[1:]:
    v = float(r[iv].replace(",", ""))
    v *= TIME.get(r[iu], 1.0) * BYTES.get(r[iu], 1.0)  # µs, bytes
    per[r[iid]][r[im]] = v
    per[r[iid]]["name"] = r[ik]
agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
for d in per.values():
    a = agg[re.sub(r"\(.*", "", d["name"])[:70]]
    a[0] += 1
    a[1] += d.get("gpu__time_duration.sum", 0.0)
    a[2] += d.get("dram__bytes.sum", 0.0)
print(f"total {sum(a[1] for a in agg.values()) / 1e3:.3f} ms over {len(per)} kernels")
for n, a in sorted(agg.items(), key=lambda x: -x[1][1])[:int(sys.argv[2]) if len(sys.argv) > 2 else 40]:
    print(f"{a[1] / 1e3:8.3f} ms {a[0]:4d}x {a[1] / a[0]:9.1f} us {a[2] / max(a[1], 1e-9) / 1e3:7.0f} GB/s  {n}")
