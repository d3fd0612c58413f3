#!/bin/sh
# End-to-end tests of the `ecenet` program (run by `make check`).
#
# Environment (set by Makefile.am):
#   ECENET            the ecenet program
#   ECENET_TEST_DATA  tests/data of the source tree
#   ECENET_WRAPPER    optional command prefix, e.g. valgrind (check-valgrind)
#
#  (a) `ecenet compute` on every tests/data/golden_xyz/NAME.extxyz with
#      golden/NAME.model.safetensors reproduces the expected energy (1e-12
#      relative), forces (1e-10 * max|F|) and stress (1e-10 * max|sigma|)
#      that the input file carries.
#  (b) bad inputs: exit status 1, a message naming the file (and the line
#      for extxyz errors), no output file.
#  (c) several frames in, as many frames out.
#  (d) `ecenet info` on every golden model names its elements.
#  (e) `ecenet bench` and `ecenet profile` print the library version, the
#      time and the ECENET_* variables in their headers, bench also the omp
#      backend's device.

if [ -z "${ECENET:-}" ] || [ ! -x "$ECENET" ]; then
    echo "SKIP: ECENET is not set to the ecenet program"
    exit 77
fi
data=${ECENET_TEST_DATA:-}
if [ -z "$data" ] || [ ! -d "$data/golden_xyz" ] || [ ! -d "$data/golden" ]; then
    echo "SKIP: ECENET_TEST_DATA does not point at tests/data"
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_cli.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

n_pass=0
n_fail=0
pass() { n_pass=$((n_pass + 1)); echo "PASS: $1"; }
fail() { n_fail=$((n_fail + 1)); echo "FAIL: $1"; }

# ECENET_WRAPPER is split into words on purpose.
ecenet() { $ECENET_WRAPPER "$ECENET" "$@"; }

# compare EXPECTED GOT: frame by frame, the energy, stress and forces of GOT
# against those written in EXPECTED; prints the largest deviations.
compare() {
    awk -v expfile="$1" '
    function absv(x) { return x < 0 ? -x : x }
    # key=value or key="quoted value" from the comment line s
    function kv(s, key,    r) {
        if (match(s, "(^|[ \t])" key "=\"[^\"]*\"")) {
            r = substr(s, RSTART, RLENGTH)
            sub("^[ \t]*" key "=\"", "", r); sub("\"$", "", r); return r
        }
        if (match(s, "(^|[ \t])" key "=[^ \t]*")) {
            r = substr(s, RSTART, RLENGTH)
            sub("^[ \t]*" key "=", "", r); return r
        }
        return ""
    }
    # token offset (1-based) of the forces column, from Properties
    function forces_col(s,    p, n, f, i, off) {
        p = kv(s, "Properties")
        if (p == "") return 0
        n = split(p, f, ":"); off = 1
        for (i = 1; i + 2 <= n; i += 3) {
            if (f[i] == "forces") return off
            off += f[i + 2]
        }
        return 0
    }
    {
        k = (FILENAME == expfile) ? "e" : "g"
        if (state[k] == "" || state[k] == "count") {
            if ($0 ~ /^[ \t]*$/) next
            fr[k]++; nat[k, fr[k]] = $1 + 0; state[k] = "comment"; next
        }
        if (state[k] == "comment") {
            f = fr[k]
            en[k, f] = kv($0, "energy"); st[k, f] = kv($0, "stress")
            fc[k, f] = forces_col($0); atom[k] = 0
            state[k] = nat[k, f] > 0 ? "atoms" : "count"; next
        }
        f = fr[k]; a = ++atom[k]; c = fc[k, f]
        sp[k, f, a] = $1
        if (c > 0) { fx[k, f, a] = $(c + 1); fy[k, f, a] = $(c + 2); fz[k, f, a] = $(c + 3) }
        if (atom[k] >= nat[k, f]) state[k] = "count"
    }
    END {
        if (fr["e"] != fr["g"]) { print "frames: expected " fr["e"] ", got " fr["g"]; exit 1 }
        for (f = 1; f <= fr["e"]; f++) {
            fn = f - 1   # frames are numbered from 0, as ecenet does
            if (nat["e", f] != nat["g", f]) { print "frame " fn ": atom count differs"; bad = 1; continue }
            if (fc["g", f] == 0) { print "frame " fn ": no forces column in output"; bad = 1; continue }
            e = en["e", f] + 0; g = en["g", f] + 0
            if (en["g", f] == "") { print "frame " fn ": no energy in output"; bad = 1 }
            de = absv(g - e) / (absv(e) > 0 ? absv(e) : 1)
            if (de > 1e-12) { printf "frame %d: energy %.17g, expected %.17g (rel %.3g)\n", fn, g, e, de; bad = 1 }
            fmax = 0; dfmax = 0
            for (a = 1; a <= nat["e", f]; a++) {
                if (sp["e", f, a] != sp["g", f, a]) { print "frame " fn " atom " a ": species differs"; bad = 1 }
                if (absv(fx["e", f, a]) > fmax) fmax = absv(fx["e", f, a])
                if (absv(fy["e", f, a]) > fmax) fmax = absv(fy["e", f, a])
                if (absv(fz["e", f, a]) > fmax) fmax = absv(fz["e", f, a])
            }
            for (a = 1; a <= nat["e", f]; a++) {
                d = absv(fx["g", f, a] - fx["e", f, a]); if (d > dfmax) dfmax = d
                d = absv(fy["g", f, a] - fy["e", f, a]); if (d > dfmax) dfmax = d
                d = absv(fz["g", f, a] - fz["e", f, a]); if (d > dfmax) dfmax = d
            }
            rf = fmax > 0 ? dfmax / fmax : dfmax
            if (rf > 1e-10) { printf "frame %d: forces differ by %.3g * max|F|\n", fn, rf; bad = 1 }
            line = sprintf("frame %d: energy rel %.3g, forces %.3g * max|F|", fn, de, rf)
            ne = split(st["e", f], se, " "); ng = split(st["g", f], sg, " ")
            if (ne != ng) { printf "frame %d: stress has %d values, expected %d\n", fn, ng, ne; bad = 1 }
            else if (ne == 9) {
                smax = 0; dsu = 0; dsl = 0
                for (i = 1; i <= 9; i++) if (absv(se[i]) > smax) smax = absv(se[i])
                if (smax == 0) smax = 1
                # The output stress is the symmetric matrix built from the
                # upper triangle (Voigt); the expected 3x3 is unsymmetrised,
                # so its lower triangle differs by the model antisymmetric
                # part (~1e-7 of max|sigma| in diamond): looser bound there.
                for (i = 1; i <= 9; i++) {
                    d = absv(sg[i] - se[i]) / smax
                    if (i == 4 || i == 7 || i == 8) { if (d > dsl) dsl = d }
                    else if (d > dsu) dsu = d
                }
                if (dsu > 1e-10) { printf "frame %d: stress (upper) differs by %.3g * max|sigma|\n", fn, dsu; bad = 1 }
                if (dsl > 1e-6) { printf "frame %d: stress (lower) differs by %.3g * max|sigma|\n", fn, dsl; bad = 1 }
                line = line sprintf(", stress %.3g (lower triangle %.3g) * max|sigma|", dsu, dsl)
            } else if (ne != 0) { printf "frame %d: stress has %d values\n", fn, ne; bad = 1 }
            print line
        }
        exit bad
    }' "$1" "$2"
}

frames() { awk 'BEGIN{n=0; s=0} s==0 && $0 !~ /^[ \t]*$/ {n++; s=$1+1; next} s>0 {s--} END{print n}' "$1"; }

# ---- (a) golden cases through the extxyz path ---------------------------
for in in "$data"/golden_xyz/*.extxyz; do
    name=$(basename "$in" .extxyz)
    model="$data/golden/$name.model.safetensors"
    out="$tmp/$name.out.extxyz"
    if ecenet compute --model "$model" "$in" -o "$out" 2>"$tmp/err"; then
        cat "$tmp/err"
        if compare "$in" "$out"; then
            pass "golden $name"
        else
            fail "golden $name (output differs from the expected values)"
        fi
    else
        cat "$tmp/err"
        fail "golden $name (ecenet compute failed)"
    fi
done

# ---- (b) bad inputs: status 1, file:line in the message, no output ------
eth="$data/golden_xyz/ethanol.extxyz"
dia="$data/golden_xyz/diamond.extxyz"
eth_model="$data/golden/ethanol.model.safetensors"
dia_model="$data/golden/diamond.model.safetensors"

# expect_error NAME PATTERN ARGS...: ecenet ARGS -o $tmp/out.extxyz must
# exit with 1, print PATTERN (grep -E) on stderr and leave no output file.
expect_error() {
    what=$1
    pattern=$2
    shift 2
    rm -f "$tmp"/out.extxyz*
    ecenet "$@" -o "$tmp/out.extxyz" >"$tmp/stdout" 2>"$tmp/err"
    rc=$?
    msg=$(cat "$tmp/err")
    if [ "$rc" -ne 1 ]; then
        fail "$what: exit status $rc, expected 1 ($msg)"
    elif ! grep -Eq -- "$pattern" "$tmp/err"; then
        fail "$what: message '$msg' does not match '$pattern'"
    elif ls "$tmp"/out.extxyz* >/dev/null 2>&1; then
        fail "$what: an output file was written"
    else
        pass "$what: $msg"
    fi
}

head -n 10 "$eth" >"$tmp/truncated.extxyz"
expect_error "truncated frame" "truncated\.extxyz:11:" \
    compute --model "$eth_model" "$tmp/truncated.extxyz"

head -n 1 "$eth" >"$tmp/nocomment.extxyz"
expect_error "missing comment line" "nocomment\.extxyz:2:" \
    compute --model "$eth_model" "$tmp/nocomment.extxyz"

sed '4s/^\([A-Za-z]*\) [^ ]*/\1 1.5x/' "$eth" >"$tmp/badnumber.extxyz"
expect_error "bad number" "badnumber\.extxyz:4:.*1\.5x" \
    compute --model "$eth_model" "$tmp/badnumber.extxyz"

sed '4s/^\([A-Za-z]*\) [^ ]*/\1 0x10/' "$eth" >"$tmp/hexnumber.extxyz"
expect_error "hexadecimal number" "hexnumber\.extxyz:4:.*0x10" \
    compute --model "$eth_model" "$tmp/hexnumber.extxyz"

sed '5s/^[A-Za-z]*/Xq/' "$eth" >"$tmp/badelement.extxyz"
expect_error "unknown element" "badelement\.extxyz:5:.*Xq" \
    compute --model "$eth_model" "$tmp/badelement.extxyz"

sed '3s/^[A-Za-z]*/Na/' "$eth" >"$tmp/notinmodel.extxyz"
expect_error "element not in the model" "notinmodel\.extxyz:3:.*Na" \
    compute --model "$eth_model" "$tmp/notinmodel.extxyz"

sed '2s/Lattice="[^ ]* /Lattice="/' "$dia" >"$tmp/badlattice.extxyz"
expect_error "Lattice with 8 numbers" "badlattice\.extxyz:2:.*Lattice" \
    compute --model "$dia_model" "$tmp/badlattice.extxyz"

sed '2s/Lattice="[^"]*" //' "$dia" >"$tmp/pbcnolattice.extxyz"
expect_error "pbc without Lattice" "pbcnolattice\.extxyz:2:" \
    compute --model "$dia_model" "$tmp/pbcnolattice.extxyz"

sed '2s/$/ tag=1 tag=2/' "$eth" >"$tmp/dupkey.extxyz"
expect_error "a comment key given twice" "dupkey\.extxyz:2: key 'tag' given twice" \
    compute --model "$eth_model" "$tmp/dupkey.extxyz"

sed '4s/$/ 7/' "$eth" >"$tmp/extracol.extxyz"
expect_error "too many columns" "extracol\.extxyz:4:" \
    compute --model "$eth_model" "$tmp/extracol.extxyz"

sed '1s/.*/nine/' "$eth" >"$tmp/badcount.extxyz"
expect_error "bad atom count" "badcount\.extxyz:1:" \
    compute --model "$eth_model" "$tmp/badcount.extxyz"

# --output naming the model file (a copy of it) is refused, the model intact
cp "$eth_model" "$tmp/model_copy.safetensors"
ecenet compute --model "$tmp/model_copy.safetensors" "$eth" -o "$tmp/model_copy.safetensors" \
    >/dev/null 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q "is the model file" "$tmp/err" &&
    cmp -s "$eth_model" "$tmp/model_copy.safetensors"; then
    pass "output naming the model file refused: $(head -n 1 "$tmp/err")"
else
    fail "output naming the model file: exit status $rc, $(head -n 1 "$tmp/err")"
fi
# an output that is a symbolic link is written through: the link stays
rm -f "$tmp/target.extxyz" "$tmp/link.extxyz"
: >"$tmp/target.extxyz"
ln -s target.extxyz "$tmp/link.extxyz"
if ecenet compute --model "$eth_model" "$eth" -o "$tmp/link.extxyz" 2>"$tmp/err" &&
    [ -L "$tmp/link.extxyz" ] && [ -s "$tmp/target.extxyz" ]; then
    pass "output through a symbolic link"
else
    fail "output through a symbolic link: $(cat "$tmp/err"); $(ls -l "$tmp/link.extxyz" "$tmp/target.extxyz")"
fi

# a wire (periodic along a only, zero rows for b and c): energy and forces,
# no stress (the cell has no volume); this used to fail the frame
printf '3\nLattice="3.0 0 0 0 0 0 0 0 0" pbc="T F F" Properties=species:S:1:pos:R:3\nC 0.0 0.0 0.0\nC 1.5 0.0 0.0\nH 0.7 1.1 0.0\n' >"$tmp/wire.extxyz"
if ecenet compute --model "$eth_model" "$tmp/wire.extxyz" -o "$tmp/wire.out.extxyz" 2>"$tmp/err" &&
    grep -q "energy=" "$tmp/wire.out.extxyz" && ! grep -q "stress=" "$tmp/wire.out.extxyz"; then
    pass "a wire without cell volume: energy and forces, no stress"
else
    fail "a wire without cell volume: $(cat "$tmp/err")"
fi

# atom 2 moved to 1e-9 Å from atom 1: the fp64 coincidence check (1e-10 Å)
# passes, fp32 rounds the distance to zero and the energy comes out NaN,
# which must fail the frame rather than be written, naming the pair
awk 'NR == 3 { x = $2; y = $3; z = $4 }
     NR == 4 { printf "%s %.12f %s %s %s %s %s\n", $1, x + 1e-9, y, z, $5, $6, $7; next }
     { print }' "$eth" >"$tmp/closepair.extxyz"
expect_error "non-finite energy (fp32, atoms 1e-9 Å apart)" \
    "closepair\.extxyz:1: frame 0: the energy is not finite.*the closest atoms, 0 and 1, are 1e-09 Å apart; no output written" \
    compute --model "$eth_model" --backend omp --precision f32 "$tmp/closepair.extxyz"

expect_error "missing model file" "no-such-model\.safetensors" \
    compute --model "$tmp/no-such-model.safetensors" "$eth"

expect_error "unknown backend" "no-such-backend" \
    compute --model "$eth_model" --backend no-such-backend "$eth"

expect_error "missing input file" "no-such-input\.extxyz" \
    compute --model "$eth_model" "$tmp/no-such-input.extxyz"

# usage errors: status 2, the bad option named
rm -f "$tmp"/out.extxyz*
ecenet compute --model "$eth_model" --frobnicate "$eth" -o "$tmp/out.extxyz" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q -- "--frobnicate" "$tmp/err" && [ ! -e "$tmp/out.extxyz" ]; then
    pass "unknown option: $(head -n 1 "$tmp/err")"
else
    fail "unknown option: exit status $rc, $(cat "$tmp/err")"
fi

# a bad --precision names itself; the spelled-out names are the same precision
ecenet compute --model "$eth_model" --precision f16 "$eth" -o "$tmp/out.extxyz" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q -- "--precision 'f16' is neither f64 nor f32" "$tmp/err" &&
    [ ! -e "$tmp/out.extxyz" ]; then
    pass "bad precision: $(head -n 1 "$tmp/err")"
else
    fail "bad precision: exit status $rc, $(cat "$tmp/err")"
fi
if ecenet compute --model "$eth_model" --backend ref --precision f64 "$eth" -o "$tmp/p1.extxyz" 2>/dev/null &&
    ecenet compute --model "$eth_model" --backend ref --precision double "$eth" -o "$tmp/p2.extxyz" 2>/dev/null &&
    [ -s "$tmp/p1.extxyz" ] && cmp -s "$tmp/p1.extxyz" "$tmp/p2.extxyz"; then
    pass "--precision double is f64"
else
    fail "--precision double is not the same as f64"
fi

# ---- (c) several frames -------------------------------------------------
{ cat "$eth"; cat "$eth"; echo; } >"$tmp/two.extxyz"
if ecenet compute --model "$eth_model" "$tmp/two.extxyz" -o "$tmp/two.out.extxyz" 2>"$tmp/err" &&
    [ "$(frames "$tmp/two.out.extxyz")" -eq 2 ] &&
    [ "$(grep -c '^frame' "$tmp/err")" -eq 2 ] &&
    compare "$tmp/two.extxyz" "$tmp/two.out.extxyz"; then
    pass "two frames in, two frames out"
else
    cat "$tmp/err"
    fail "two frames in, two frames out"
fi

# standard input to standard output
if ecenet compute --model "$eth_model" - <"$eth" >"$tmp/stdout.extxyz" 2>"$tmp/err" &&
    compare "$eth" "$tmp/stdout.extxyz"; then
    pass "standard input to standard output"
else
    cat "$tmp/err"
    fail "standard input to standard output"
fi

# ---- (d) info -----------------------------------------------------------
for spec in ethanol:H,C,O diamond:C options:Na,Cl; do
    name=${spec%%:*}
    elements=${spec#*:}
    if ecenet info "$data/golden/$name.model.safetensors" >"$tmp/info" 2>"$tmp/err"; then
        missing=
        for el in $(echo "$elements" | tr ',' ' '); do
            grep -Eq "^[[:space:]]+[0-9]+[[:space:]]+${el}[[:space:]]" "$tmp/info" ||
                missing="$missing $el"
        done
        if [ -z "$missing" ]; then
            pass "info $name"
        else
            cat "$tmp/info"
            fail "info $name: elements not listed:$missing"
        fi
    else
        cat "$tmp/err"
        fail "info $name: failed"
    fi
done

# ---- (e) bench: the header says where and how it ran -------------------
# (the library version, the ECENET_* variables that select kernels, and the
# device of each backend that names one)
version=$(ecenet --version 2>/dev/null | sed -n '1s/.* //p')
if ECENET_RS_SYM=0 ecenet bench --config small --diamond 1 --backend ref --n-warmup 0 \
    --n-time 1 >"$tmp/bench" 2>"$tmp/err"; then
    if grep -q "libecenet $version, .* UTC; environment:.* ECENET_RS_SYM=0" "$tmp/bench" &&
        grep -q "^ref " "$tmp/bench"; then
        pass "bench header: version, time, ECENET_* variables"
    else
        cat "$tmp/bench"
        fail "bench header: version, time, ECENET_* variables"
    fi
    if ecenet --version | grep -q "omp"; then
        if ecenet bench --config small --diamond 1 --backend omp:f64 --n-warmup 0 --n-time 1 \
            >"$tmp/bench" 2>"$tmp/err" && grep -q "^  omp device: .*OpenMP thread" "$tmp/bench"; then
            pass "bench header: the omp backend's device"
        else
            cat "$tmp/bench" "$tmp/err"
            fail "bench header: the omp backend's device"
        fi
    fi
else
    cat "$tmp/err"
    fail "bench --config small --backend ref"
fi
if ECENET_RS_SYM=0 ecenet profile --config small --diamond 1 --backend ref --n-warmup 0 \
    --n-time 1 >"$tmp/profile" 2>"$tmp/err" &&
    grep -q "libecenet $version, .* UTC; environment:.* ECENET_RS_SYM=0" "$tmp/profile"; then
    pass "profile header: version, time, ECENET_* variables"
else
    cat "$tmp/profile" "$tmp/err"
    fail "profile header: version, time, ECENET_* variables"
fi

# ---- (f) nve: velocity Verlet's energy error is O(dt²) -----------------
# Over the same 10 fs, halving the time step must divide the largest
# excursion of the total energy by about 4 in fp64 (measured 4.00 on ref and
# omp: 0.006799 -> 0.001700 meV/atom); a force that is not the energy's
# gradient, or a wrong velocity half-step, breaks that scaling (a half kick
# 10% too long gave 1.556 -> 1.493).
nve_be=ref
ecenet --version | grep -q omp && nve_be=omp
max_de() { sed -n 's/^  max |Etot - Etot(0)| *\([0-9.eE+-]*\) meV\/atom$/\1/p' "$1"; }
if ecenet nve --config small --diamond 1 --backend $nve_be --dt 0.5 --steps 20 \
    >"$tmp/nve1" 2>"$tmp/err" &&
    ecenet nve --config small --diamond 1 --backend $nve_be --dt 0.25 --steps 40 \
        >"$tmp/nve2" 2>>"$tmp/err"; then
    a=$(max_de "$tmp/nve1")
    b=$(max_de "$tmp/nve2")
    if [ -n "$a" ] && [ -n "$b" ] &&
        awk -v a="$a" -v b="$b" 'BEGIN { exit !(b > 0 && a / b > 3 && a / b < 5) }'; then
        pass "nve ($nve_be f64): max |dEtot| $a -> $b meV/atom when dt halves"
    else
        cat "$tmp/nve1" "$tmp/nve2"
        fail "nve ($nve_be f64): max |dEtot| '$a' -> '$b' meV/atom, expected a ratio near 4"
    fi
else
    cat "$tmp/err"
    fail "nve --config small --backend $nve_be"
fi

# velocities from a momenta column and masses from a masses column: nine
# atoms of mass 2.5 with p = (0.1, 0, 0) start with Ekin = 9 * 0.1^2 / 5 =
# 0.018 eV, and with their net momentum the temperature counts 3N = 27
# degrees of freedom: 2 * 0.018 / (27 kB) = 15.47 K; a bad mass and a
# momenta column of the wrong shape are named by file and line
awk 'NR == 2 { sub(/Properties=[^ ]*/, "Properties=species:S:1:pos:R:3:masses:R:1:momenta:R:3") }
     NR > 2 { $0 = $1 " " $2 " " $3 " " $4 " 2.5 0.1 0 0" } { print }' "$eth" >"$tmp/moving.extxyz"
if ecenet nve --model "$eth_model" --backend ref --steps 1 "$tmp/moving.extxyz" \
    >"$tmp/nve3" 2>"$tmp/err" && grep -q "velocities from the input's momenta" "$tmp/nve3" &&
    grep -Eq '^ +0 +0\.000 +[-0-9.]+ +0\.01800000 +[-0-9.]+ +15\.47 ' "$tmp/nve3"; then
    pass "nve: velocities from momenta and masses columns"
else
    cat "$tmp/nve3" "$tmp/err"
    fail "nve: velocities from momenta and masses columns"
fi
# nve_error WHAT PATTERN INPUT: ecenet nve on INPUT exits 1 with PATTERN on stderr
nve_error() {
    ecenet nve --model "$eth_model" --backend ref --steps 1 "$3" >/dev/null 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 1 ] && grep -q -- "$2" "$tmp/err"; then
        pass "nve: $1: $(cat "$tmp/err")"
    else
        fail "nve: $1: exit status $rc, $(cat "$tmp/err")"
    fi
}
sed '2s/momenta:R:3/momenta:R:2/; 3,$s/ 0 0$/ 0/' "$tmp/moving.extxyz" >"$tmp/badcol.extxyz"
nve_error "momenta column of the wrong shape" \
    "badcol\.extxyz:2: column momenta:R:2, expected momenta:R:3" "$tmp/badcol.extxyz"
sed '5s/ 2\.5 / -1 /' "$tmp/moving.extxyz" >"$tmp/badmass.extxyz"
nve_error "bad mass" "badmass\.extxyz:5: mass '-1'" "$tmp/badmass.extxyz"
# masses in the --mass range only (1e-300 gave T ~ 1e300 K as a result)
sed '5s/ 2\.5 / 1e-300 /' "$tmp/moving.extxyz" >"$tmp/tinymass.extxyz"
nve_error "tiny mass" "tinymass\.extxyz:5: mass '1e-300' is not a number in \[1e-06, 1e+06\] amu" \
    "$tmp/tinymass.extxyz"
sed '5s/ 2\.5 0\.1 / 2.5 1e300 /' "$tmp/moving.extxyz" >"$tmp/hugep.extxyz"
nve_error "huge momenta" "hugep\.extxyz: the momenta give a kinetic energy that is not finite" \
    "$tmp/hugep.extxyz"
# the fp32 close pair of (b): the first step's compute fails, named with the step
if ecenet nve --model "$eth_model" --backend omp --precision f32 --steps 1 "$tmp/closepair.extxyz" \
    >/dev/null 2>"$tmp/err"; then
    fail "nve: non-finite energy: exit status 0"
elif grep -q "step 0 (t = 0 fs): the energy is not finite.*time step may be too large" "$tmp/err"; then
    pass "nve: non-finite energy: $(cat "$tmp/err")"
else
    fail "nve: non-finite energy: $(cat "$tmp/err")"
fi
# a bad option is named with its value and the reason, for nve, bench and profile
opt_error() { # CMD ARGS... ; the last is the expected message; exit status 2
    local want=${!#}
    ecenet "${@:1:$#-1}" >/dev/null 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 2 ] && head -n 1 "$tmp/err" | grep -qF -- "$want"; then
        pass "refused: $(head -n 1 "$tmp/err")"
    else
        fail "${*:1:$#-1}: exit status $rc, $(head -n 1 "$tmp/err"), expected '$want'"
    fi
}
opt_error nve --config small --dt 0 "nve: --dt '0' is not a time step in [1e-06, 100] fs"
opt_error nve --config small --mass H=1e7 "nve: --mass 'H=1e7' has no mass in [1e-06, 1e+06] amu"
opt_error nve --config small --mass h=1 "nve: --mass 'h=1' does not start with an element symbol"
opt_error nve --config small --steps "nve: --steps needs a value"
opt_error bench --n-time 0 "bench: --n-time '0' is not an integer in [1, 64]"
opt_error bench --frobnicate 1 "bench: --frobnicate is not an option"
opt_error profile --config small --precision f16 "profile: --precision 'f16' is neither f64 nor f32"
opt_error profile --config small --json "profile: --json needs a value"
opt_error bench --config small --diamond 1 --backend , "bench: --backend ',' names no backend"
opt_error nve --config small --mass C=12 --mass C=13 "nve: --mass 'C=13' gives an element's mass a second time"
opt_error nve --config small --diamond 1 "$eth" "nve: give either --diamond N or an input file, not both"
# standard output that cannot be written is an error, not a silent success
if [ -w /dev/full ]; then
    ecenet --version >/dev/full 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 1 ] && grep -q "write error on standard output" "$tmp/err"; then
        pass "--version to a full device: $(cat "$tmp/err")"
    else
        fail "--version to a full device: exit status $rc, $(cat "$tmp/err")"
    fi
fi

echo "$n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]
