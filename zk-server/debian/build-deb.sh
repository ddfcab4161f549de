#!/usr/bin/env bash
# Builds zkrs's Debian packages into target/debian/ (or $ZKRS_DEB_OUT):
# - zkrs_<version>-1_<arch>.deb, with cargo-deb: zkrs-server, zkrs-cli and zkrs-bench, the systemd
#   unit (zkrs.service, running as the zkrs system user), /etc/zkrs/zoo.cfg and the man pages
#   (and its zkrs-dbgsym debug symbols). Extra arguments go to `cargo deb`.
# - libzkrs2 and libzkrs-dev, the C library and its development files, with
#   zk-ffi/debian/build-deb.sh.
# ZKRS_DEB_PROFILE picks the cargo profile the binaries are built with (default release).
# ZKRS_DEB_PREBUILT=1: the binaries are already in the profile's directory (the packaging test,
# with the dev binaries its run built): nothing is compiled and only the zkrs package is made.
set -euo pipefail
cd "$(dirname "$0")/../.."
profile="${ZKRS_DEB_PROFILE:-release}"
out="${ZKRS_DEB_OUT:-target/debian}"
target="${CARGO_TARGET_DIR:-target}"
case "$profile" in
  dev) bins="$target/debug" ;;
  *) bins="$target/$profile" ;;
esac
command -v cargo-deb >/dev/null 2>&1 || cargo install cargo-deb --locked
prebuilt="${ZKRS_DEB_PREBUILT:-0}"
# The packaged server, shell and C library speak Kerberos (SASL GSSAPI), as Apache's Java server
# does out of the box: built with the `kerberos` features, against the system's GSSAPI (the
# packages then depend on libgssapi-krb5-2). Building needs its headers and libclang.
if [ "$prebuilt" != 1 ]; then
  missing=()
  [ -f /usr/include/gssapi/gssapi.h ] || missing+=(libkrb5-dev)
  compgen -G '/usr/lib/llvm-*/lib/libclang.so' >/dev/null || missing+=(libclang-dev)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "build-deb.sh: the Kerberos build needs ${missing[*]} (apt install ${missing[*]})" >&2
    exit 1
  fi
  cargo build --profile "$profile" -p zk-server --features kerberos --bins
  cargo build --profile "$profile" -p zk-client --features kerberos --bin zkrs-cli
fi
mkdir -p "$bins/man"
for page in zk-server/debian/man/*.1; do
  gzip -9 -n -c "$page" > "$bins/man/$(basename "$page").gz"
done
# Debug symbols go to a separate zkrs-dbgsym package; the binaries in zkrs are stripped.
# cargo-deb reads the assets' target/release/ as the chosen profile's directory.
cargo deb -p zk-server --no-build --profile "$profile" --dbgsym -o "$out" "$@"
if [ "$prebuilt" != 1 ]; then
  cargo build --profile "$profile" -p zk-ffi --features kerberos
  zk-ffi/debian/build-deb.sh "$out" "$bins"
fi
