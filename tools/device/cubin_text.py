#!/usr/bin/env python3
"""Hash every kernel's machine code (the cubin's .text.<kernel> sections) of
CUDA sources, compiled here for sm_90a as the build does, so that a change
can be shown to leave the default kernels byte-identical without a GPU
(this machine has nvcc and ptxas but no cuobjdump).

    python3 tools/device/cubin_text.py OUT src/cuda/cuda_frame.cu ...
        writes OUT/<name>.txt: "hash size section" per kernel, sorted
    diff <(cut -d' ' -f1,3 A/cuda_frame.txt) <(cut -d' ' -f1,3 B/cuda_frame.txt)

Compare the listings of two trees (e.g. a `git worktree` of the base and
the working tree); the flags are the build's for --with-cuda-arch=sm_90
(`make V=1` shows them) less the compute_90 PTX, which has no machine code.
"""
import hashlib
import os
import struct
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NVCC = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
FLAGS = ["-std=c++17", "-O3", "-lineinfo", "-gencode", "arch=compute_90a,code=sm_90a",
         "-DECN_CUDA_SM90A"] + ["-I" + os.path.join(ROOT, d)
                                for d in ("include", "src/core", "src/cuda")]


def text_sections(path):
    """(name, bytes) of every .text.* section of a little-endian ELF64 file"""
    d = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    secs = [struct.unpack_from("<IIQQQQ", d, shoff + i * shentsize) for i in range(shnum)]
    stroff = secs[shstrndx][4]

    def name(o):
        return d[stroff + o:d.index(b"\0", stroff + o)].decode()
    for nm, _typ, _flags, _addr, off, size in secs:
        n = name(nm)
        if n.startswith(".text."):
            yield n, d[off:off + size]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for src in sys.argv[2:]:
        base = os.path.splitext(os.path.basename(src))[0]
        cubin = os.path.join(out, base + ".cubin")
        subprocess.run([NVCC] + FLAGS + ["-cubin", src, "-o", cubin], check=True)
        rows = sorted((n, hashlib.sha1(b).hexdigest()[:16], len(b))
                      for n, b in text_sections(cubin))
        with open(os.path.join(out, base + ".txt"), "w") as f:
            for n, h, size in rows:
                f.write(f"{h} {size} {n}\n")
        print(f"{src}: {len(rows)} kernels -> {out}/{base}.txt")


if __name__ == "__main__":
    main()
