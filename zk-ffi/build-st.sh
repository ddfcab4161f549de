#!/bin/sh
# Links libzookeeper_st.so.2, the single-threaded library, from the libzkrs static archive:
# the same code, a load-time switch to single-threaded handles (csrc/st_mode.c), and only the
# exports in st.map (no synchronous calls), under the soname Apache's st library has.
# Usage: build-st.sh path/to/libzkrs.a OUTDIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
archive=$1
out=$2
mkdir -p "$out"
${CC:-cc} -O2 -fPIC -c "$here/csrc/st_mode.c" -o "$out/st_mode.o"
${CC:-cc} -shared -o "$out/libzookeeper_st.so.2" "$out/st_mode.o" \
    -Wl,--whole-archive "$archive" -Wl,--no-whole-archive \
    -Wl,--version-script="$here/st.map" -Wl,-soname,libzookeeper_st.so.2 \
    -Wl,--gc-sections -Wl,-z,relro -Wl,-z,now -lpthread -ldl -lm
rm -f "$out/st_mode.o"
