#!/bin/bash
# Dev machine: pack what `./configure --with-cuda && make check` needs on the
# device that its image lacks (doc/gpu-runs.md, "make check on the GPU"):
# the autotools outputs of ./autogen.sh (git-ignored, so they do not travel
# with the tree) and the headers, libraries and pkg-config files of Check,
# subunit, BLIS and cJSON, copied from this Debian machine's packages into one
# prefix, as .cudabuild/mkcheck.tar.xz. tools/device/makecheck.sh unpacks it.
#   ./autogen.sh && bash tools/device/pack_check.sh
set -e
cd "$(dirname "$0")/../.."
[ -x configure ] || { echo "run ./autogen.sh first"; exit 1; }
P=/tmp/mkcheckpack; rm -rf $P && mkdir -p $P/deps/include $P/deps/lib/pkgconfig $P/auto
A=/usr/lib/x86_64-linux-gnu
cp -r /usr/include/check.h /usr/include/check_stdint.h /usr/include/subunit /usr/include/cjson $P/deps/include/
cp -L /usr/include/x86_64-linux-gnu/blis.h $P/deps/include/
cp -L $A/libcheck.a $A/libcheck_pic.a $A/libsubunit.a $P/deps/lib/
for l in libsubunit.so.0 libblis.so.4 libcjson.so.1; do cp -L $A/$l $P/deps/lib/; ln -s $l $P/deps/lib/${l%.*}; done
# the .pc files name their prefix @PREFIX@; makecheck.sh writes the real one
for pc in check libsubunit; do
  sed -e 's|^prefix=.*|prefix=@PREFIX@|' -e 's|^libdir=.*|libdir=${prefix}/lib|' \
    $A/pkgconfig/$pc.pc > $P/deps/lib/pkgconfig/$pc.pc
done
# autotools outputs, with their times, so that make sees them up to date
git ls-files -o --ignored --exclude-standard -- configure aclocal.m4 config.h.in \
  build-aux m4 'Makefile.in' > $P/auto.list
tar -cf $P/auto/auto.tar -T $P/auto.list
mkdir -p .cudabuild && rm -f .cudabuild/mkcheck.tar.xz
tar -C $P -cJf .cudabuild/mkcheck.tar.xz deps auto
ls -la .cudabuild/mkcheck.tar.xz; wc -l < $P/auto.list
