#!/usr/bin/env bash
# Builds zkrs's Debian packages into target/debian/:
# - zkrs_<version>-1_<arch>.deb, with cargo-deb: zkrs-server, zkrs-cli and zkrs-bench, the systemd
#   unit (zkrs.service, running as the zkrs system user), /etc/zkrs/zoo.cfg and the man pages
#   (and its zkrs-dbgsym debug symbols). Extra arguments go to `cargo deb`.
# - libzkrs2 and libzkrs-dev, the C library and its development files, with
#   zk-ffi/debian/build-deb.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v cargo-deb >/dev/null 2>&1 || cargo install cargo-deb --locked
cargo build --release -p zk-server --bins
cargo build --release -p zk-client --bin zkrs-cli --features cli
mkdir -p target/release/man
for page in zk-server/debian/man/*.1; do
  gzip -9 -n -c "$page" > "target/release/man/$(basename "$page").gz"
done
# Debug symbols go to a separate zkrs-dbgsym package; the binaries in zkrs are stripped.
cargo deb -p zk-server --no-build --dbgsym "$@"
cargo build --release -p zk-ffi
zk-ffi/debian/build-deb.sh target/debian target/release
