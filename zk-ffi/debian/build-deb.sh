#!/bin/sh
# Builds libzkrs's Debian packages from an already built library, with dpkg-deb:
#   libzkrs2     the shared libraries: libzookeeper_mt.so.2 (libzkrs, multi-threaded) and
#                libzookeeper_st.so.2 (single-threaded), under the sonames of Apache's C client,
#                so it stands in for Debian's libzookeeper-mt2 (Provides, Conflicts, Replaces);
#   libzkrs-dev  the headers (Apache's API and zkrs_ext.h), the unversioned links for -lzkrs,
#                -lzookeeper_mt and -lzookeeper_st, and their pkg-config files; stands in for
#                libzookeeper-mt-dev.
# Usage: zk-ffi/debian/build-deb.sh OUT_DIR LIB_DIR
#   LIB_DIR holds libzkrs.so and libzkrs.a (target/release after `cargo build --release -p zk-ffi`).
# Writes OUT_DIR/libzkrs2_<version>-1_<arch>.deb and OUT_DIR/libzkrs-dev_<version>-1_<arch>.deb.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ffi=$(dirname "$here")
root=$(dirname "$ffi")
out=${1:?usage: build-deb.sh OUT_DIR LIB_DIR}
libs=${2:?usage: build-deb.sh OUT_DIR LIB_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$root/Cargo.toml")
debver="$version-1"
arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
maintainer=$(sed -n 's/^maintainer = "\(.*\)"/\1/p' "$root/zk-server/Cargo.toml")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# The runtime package.
rt="$stage/libzkrs2"
libdir="$rt/usr/lib/$triplet"
mkdir -p "$libdir" "$rt/DEBIAN"
# Each file named after its soname, as Debian names Apache's (libzookeeper_mt.so.2.0.0).
install -m 644 "$libs/libzkrs.so" "$libdir/libzookeeper_mt.so.2.0.0"
"$ffi/build-st.sh" "$libs/libzkrs.a" "$stage/st" >/dev/null
install -m 644 "$stage/st/libzookeeper_st.so.2" "$libdir/libzookeeper_st.so.2.0.0"
# As dh_strip: debug information and local symbols out, the dynamic symbols kept.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$libdir"/*.so.*
ln -s libzookeeper_mt.so.2.0.0 "$libdir/libzookeeper_mt.so.2"
ln -s libzookeeper_st.so.2.0.0 "$libdir/libzookeeper_st.so.2"

# The development package.
dev="$stage/libzkrs-dev"
devlib="$dev/usr/lib/$triplet"
mkdir -p "$devlib/pkgconfig" "$dev/usr/include/zookeeper" "$dev/DEBIAN"
install -m 644 "$root"/include/zookeeper/*.h "$dev/usr/include/zookeeper/"
ln -s libzookeeper_mt.so.2 "$devlib/libzkrs.so"
ln -s libzookeeper_mt.so.2 "$devlib/libzookeeper_mt.so"
ln -s libzookeeper_st.so.2 "$devlib/libzookeeper_st.so"
pc() {
    sed -e "s|@PREFIX@|/usr|" -e "s|@LIBDIR@|\${prefix}/lib/$triplet|" -e "s|@NAME@|$2|" -e "s|@DESC@|$3|" \
        -e "s|@LIB@|$4|" -e "s|@CFLAGS@|$5|" "$ffi/zkrs.pc.in" > "$devlib/pkgconfig/$1.pc"
    chmod 644 "$devlib/pkgconfig/$1.pc"
}
pc zkrs zkrs "ZooKeeper C client API on the zkrs session core (multi-threaded)" zkrs -DTHREADED
pc zookeeper_mt zookeeper_mt "Apache ZooKeeper C client, multi-threaded (libzkrs)" zookeeper_mt -DTHREADED
pc zookeeper_st zookeeper_st "Apache ZooKeeper C client, single-threaded (libzkrs)" zookeeper_st ""

# What both packages carry: copyright, changelog.
for pkg in libzkrs2 libzkrs-dev; do
    doc="$stage/$pkg/usr/share/doc/$pkg"
    mkdir -p "$doc"
    sed "s/@PACKAGE@/$pkg/" "$here/copyright" > "$doc/copyright"
    sed "s/@PACKAGE@/$pkg/" "$here/changelog" | gzip -9 -n > "$doc/changelog.Debian.gz"
    chmod 644 "$doc/copyright" "$doc/changelog.Debian.gz"
    mkdir -p "$stage/$pkg/usr/share/lintian/overrides"
    install -m 644 "$here/lintian/$pkg" "$stage/$pkg/usr/share/lintian/overrides/$pkg"
done

# The glibc the libraries ask for, from their versioned symbol references.
glibc=$(objdump -T "$libdir"/*.so.* | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
# A library built with zk-ffi's `kerberos` feature (test.sh's) links MIT's GSSAPI library; the
# release packages are built without it. (gss_acquire_cred_from and client keytabs: MIT 1.11.)
gssapi=""
if objdump -p "$libdir/libzookeeper_mt.so.2.0.0" | grep -q 'NEEDED *libgssapi_krb5\.so\.2'; then
    gssapi=", libgssapi-krb5-2 (>= 1.11)"
fi
installed_size() { du -sk --exclude=DEBIAN "$1" | cut -f1; }

cat > "$rt/DEBIAN/control" <<CONTROL
Package: libzkrs2
Source: zkrs
Version: $debver
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(installed_size "$rt")
Depends: libc6 (>= $glibc), libgcc-s1 (>= 4.2)$gssapi
Provides: libzookeeper-mt2, libzookeeper-st2
Conflicts: libzookeeper-mt2, libzookeeper-st2
Replaces: libzookeeper-mt2, libzookeeper-st2
Section: libs
Priority: optional
Multi-Arch: same
Description: ZooKeeper C client library on the zkrs session core
 libzkrs implements the C client API and ABI of Apache ZooKeeper 3.8
 (libzookeeper_mt and libzookeeper_st) in Rust, under the same sonames:
 programs built for Apache's library run on it unchanged. It adds the
 server operations of ZooKeeper 3.6+ that Apache's C client lacks.
CONTROL
cat > "$rt/DEBIAN/shlibs" <<SHLIBS
libzookeeper_mt 2 libzkrs2 (>= $version)
libzookeeper_st 2 libzkrs2 (>= $version)
SHLIBS
echo "activate-noawait ldconfig" > "$rt/DEBIAN/triggers"

cat > "$dev/DEBIAN/control" <<CONTROL
Package: libzkrs-dev
Source: zkrs
Version: $debver
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(installed_size "$dev")
Depends: libzkrs2 (= $debver)
Provides: libzookeeper-mt-dev, libzookeeper-st-dev
Conflicts: libzookeeper-mt-dev, libzookeeper-st-dev
Replaces: libzookeeper-mt-dev, libzookeeper-st-dev
Section: libdevel
Priority: optional
Multi-Arch: same
Description: ZooKeeper C client library on the zkrs session core (development files)
 The headers of Apache ZooKeeper 3.8's C client API (zookeeper.h and the
 headers it includes), zkrs_ext.h for libzkrs's additions, the links to
 build with -lzkrs, -lzookeeper_mt or -lzookeeper_st, and pkg-config files
 (zkrs, zookeeper_mt, zookeeper_st).
CONTROL

for pkg in libzkrs2 libzkrs-dev; do
    (cd "$stage/$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | LC_ALL=C sort |
        xargs md5sum > DEBIAN/md5sums)
    chmod 644 "$stage/$pkg/DEBIAN"/*
    find "$stage/$pkg" -type d -exec chmod 755 {} +
    dpkg-deb --root-owner-group -Zxz --build "$stage/$pkg" "$out/${pkg}_${debver}_$arch.deb" >/dev/null
    echo "$out/${pkg}_${debver}_$arch.deb"
done
