#!/usr/bin/env python3
"""Write the extended-XYZ views of the golden reference cases.

    python3 tests/data/make_golden_xyz.py        (from the repository root)

Reads tests/data/golden/NAME.ref.safetensors (standard library only: struct
and json, no numpy) and writes

  tests/data/golden_xyz/NAME.extxyz  input structure of each golden case plus
                                     the expected energy=, stress= (the 9
                                     values of out.stress, row-major, as
                                     stored: not symmetrised) and a forces
                                     column (out.forces); used by
                                     tests/check_cli.sh
  examples/ethanol.xyz               the ethanol input structure
  examples/diamond.xyz               the diamond input structure

Every number is printed with %.17g so that it reads back exactly. The build
and the tests do not run this script; it is kept so the files are
reproducible.
"""
import json
import os
import struct
import sys

CASES = ("ethanol", "diamond", "options")

SYMBOLS = (
    "X H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co "
    "Ni Cu Zn Ga Ge As Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te "
    "I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir "
    "Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf Es Fm Md No "
    "Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og"
).split()

FORMATS = {"F64": "d", "I64": "q", "U8": "B"}


def read_safetensors(path, names):
    """Return {name: (shape, flat list)} for the requested tensors."""
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n).decode("utf-8"))
        base = 8 + n
        out = {}
        for name in names:
            if name not in header:
                continue
            info = header[name]
            begin, end = info["data_offsets"]
            fmt = FORMATS[info["dtype"]]
            count = (end - begin) // struct.calcsize(fmt)
            fh.seek(base + begin)
            values = struct.unpack("<%d%s" % (count, fmt), fh.read(end - begin))
            out[name] = (info["shape"], list(values))
    return out


def g(x):
    return "%.17g" % x


def frame_lines(t, with_results, comment_extra=""):
    pos = t["input.positions"][1]
    numbers = t["input.numbers"][1]
    cell = t["input.cell"][1]
    pbc = t["input.pbc"][1]
    n = len(numbers)
    periodic = any(pbc)
    keys = []
    if periodic:
        keys.append('Lattice="%s"' % " ".join(g(v) for v in cell))
    props = "species:S:1:pos:R:3"
    if with_results:
        props += ":forces:R:3"
    keys.append("Properties=" + props)
    if with_results:
        keys.append("energy=" + g(t["out.energy"][1][0]))
        if periodic:
            keys.append('stress="%s"' % " ".join(g(v) for v in t["out.stress"][1]))
    if periodic:
        keys.append('pbc="%s"' % " ".join("T" if p else "F" for p in pbc))
    if comment_extra:
        keys.append(comment_extra)
    lines = [str(n), " ".join(keys)]
    forces = t["out.forces"][1] if with_results else None
    for i in range(n):
        cols = [SYMBOLS[numbers[i]]] + [g(v) for v in pos[3 * i:3 * i + 3]]
        if forces is not None:
            cols += [g(v) for v in forces[3 * i:3 * i + 3]]
        lines.append(" ".join(cols))
    return lines


def write(path, lines):
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("wrote", path)


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    golden = os.path.join(root, "tests", "data", "golden")
    outdir = os.path.join(root, "tests", "data", "golden_xyz")
    os.makedirs(outdir, exist_ok=True)
    names = ["input.positions", "input.numbers", "input.cell", "input.pbc",
             "out.energy", "out.forces", "out.stress"]
    tensors = {}
    for case in CASES:
        t = read_safetensors(os.path.join(golden, case + ".ref.safetensors"), names)
        missing = [k for k in names[:6] if k not in t]
        if missing:
            sys.exit("%s: missing tensors %s" % (case, missing))
        tensors[case] = t
        write(os.path.join(outdir, case + ".extxyz"),
              frame_lines(t, True, 'golden_case=%s model="%s.model.safetensors"'
                          % (case, case)))
    write(os.path.join(root, "examples", "ethanol.xyz"),
          frame_lines(tensors["ethanol"], False))
    write(os.path.join(root, "examples", "diamond.xyz"),
          frame_lines(tensors["diamond"], False))


if __name__ == "__main__":
    main()
