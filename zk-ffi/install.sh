#!/bin/sh
# Installs libzkrs into PREFIX as a drop-in for Apache's C client:
#   lib/libzkrs.so, lib/libzookeeper_mt.so.2 -> libzkrs.so (its soname), lib/libzookeeper_mt.so,
#   lib/libzookeeper_st.so.2 (the single-threaded build) and lib/libzookeeper_st.so,
#   include/zookeeper/*.h, lib/pkgconfig/{zkrs,zookeeper_mt,zookeeper_st}.pc.
# Usage: zk-ffi/install.sh PREFIX [--no-build] [--profile debug|release]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
prefix=${1:?usage: install.sh PREFIX [--no-build] [--profile debug|release]}
shift
build=1
profile=release
while [ $# -gt 0 ]; do
    case $1 in
        --no-build) build=0 ;;
        --profile) profile=$2; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
target=${CARGO_TARGET_DIR:-$root/target}/$profile
if [ $build = 1 ]; then
    if [ "$profile" = release ]; then
        (cd "$root" && cargo build --release -p zk-ffi)
    else
        (cd "$root" && cargo build -p zk-ffi)
    fi
fi
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include/zookeeper"
install -m 755 "$target/libzkrs.so" "$prefix/lib/libzkrs.so"
ln -sf libzkrs.so "$prefix/lib/libzookeeper_mt.so.2"
ln -sf libzookeeper_mt.so.2 "$prefix/lib/libzookeeper_mt.so"
"$here/build-st.sh" "$target/libzkrs.a" "$prefix/lib"
chmod 755 "$prefix/lib/libzookeeper_st.so.2"
ln -sf libzookeeper_st.so.2 "$prefix/lib/libzookeeper_st.so"
install -m 644 "$root"/include/zookeeper/*.h "$prefix/include/zookeeper/"
pc() {
    sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|\${prefix}/lib|" -e "s|@NAME@|$2|" -e "s|@DESC@|$3|" -e "s|@LIB@|$4|" -e "s|@CFLAGS@|$5|" \
        "$here/zkrs.pc.in" > "$prefix/lib/pkgconfig/$1.pc"
}
pc zkrs zkrs "ZooKeeper C client API on the zkrs session core (multi-threaded)" zkrs -DTHREADED
pc zookeeper_mt zookeeper_mt "Apache ZooKeeper C client, multi-threaded (libzkrs)" zookeeper_mt -DTHREADED
pc zookeeper_st zookeeper_st "Apache ZooKeeper C client, single-threaded (libzkrs)" zookeeper_st ""
echo "installed into $prefix"
