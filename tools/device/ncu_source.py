#!/usr/bin/env python3
"""Summarise ncu's per-instruction source view of one kernel (here, after a
device run). Input: the CSV of
  ncu --section SourceCounters --page source --csv --print-source sass ... > f.csv
plain or gzipped (tools/device/wg.sh NCU_SOURCE=1 writes $OUT/ncu_source.csv.gz).
Prints the totals of sampled stalls, excess L2 sectors and excess shared
wavefronts, and the instructions that carry most of each.
  python3 tools/device/ncu_source.py f.csv.gz [rows]"""
import csv, gzip, sys

def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    with (gzip.open(path, 'rt') if path.endswith('.gz') else open(path)) as fh:
        rows = list(csv.reader(fh))
    head = next((i for i, r in enumerate(rows) if r and r[0] == 'Address'), None)
    if head is None:
        sys.exit(f'{path}: no "Address" header row: not an ncu --page source --csv file')
    h = rows[head]
    ix = {n: i for i, n in enumerate(h)}
    data = [r for r in rows[head + 1:] if len(r) == len(h)]

    def val(r, n):
        try:
            return float(r[ix[n]].replace(',', ''))
        except (KeyError, ValueError):
            return 0.0

    stalls = [n for n in h if n.startswith('stall_') and 'Not Issued' not in n]
    samples = sum(val(r, '# Samples') for r in data) or 1.0
    print(f'{len(data)} instructions, {samples:.0f} stall samples')
    print('stall reasons: ' + ', '.join(
        f'{n[6:]} {100 * sum(val(r, n) for r in data) / samples:.1f}%'
        for n in sorted(stalls, key=lambda n: -sum(val(r, n) for r in data))[:6]))
    for metric, ideal in (('L2 Theoretical Sectors Global Excessive', 'L2 Theoretical Sectors Global'),
                          ('L1 Wavefronts Shared Excessive', 'L1 Wavefronts Shared')):
        tot = sum(val(r, metric) for r in data)
        print(f'\n{metric}: {tot:.4g} of {sum(val(r, ideal) for r in data):.4g}')
        for r in sorted(data, key=lambda r: -val(r, metric))[:top]:
            if val(r, metric) <= 0:
                break
            n = val(r, 'Instructions Executed') or 1.0
            print(f'  {val(r, metric):10.4g}  {val(r, ideal) / n:5.1f}/instr  {r[1].strip()[:70]}')
    print('\nmost sampled instructions')
    for r in sorted(data, key=lambda r: -val(r, '# Samples'))[:top]:
        why = max(stalls, key=lambda n: val(r, n))
        print(f'  {100 * val(r, "# Samples") / samples:5.1f}%  {why[6:]:<14} {r[1].strip()[:70]}')

if __name__ == '__main__':
    main()
