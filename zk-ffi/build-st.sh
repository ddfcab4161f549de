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
# An archive built with zk-ffi's `kerberos` feature calls the system's GSSAPI library (MIT's) from
# zookeeper_init_sasl, which st.map does not export today: linked as needed, so the library names
# it only if that code is kept.
gssapi=""
if nm -u "$archive" 2>/dev/null | grep -q ' U gss_init_sec_context$'; then
    gssapi="-Wl,--as-needed -lgssapi_krb5 -Wl,--no-as-needed"
fi
${CC:-cc} -O2 -fPIC -c "$here/csrc/st_mode.c" -o "$out/st_mode.o"
${CC:-cc} -shared -o "$out/libzookeeper_st.so.2" "$out/st_mode.o" \
    -Wl,--whole-archive "$archive" -Wl,--no-whole-archive \
    -Wl,--version-script="$here/st.map" -Wl,-soname,libzookeeper_st.so.2 \
    -Wl,--gc-sections -Wl,-z,relro -Wl,-z,now $gssapi -lpthread -ldl -lm
rm -f "$out/st_mode.o"
