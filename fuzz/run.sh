#!/usr/bin/env bash
# Coverage-guided fuzzing on the stable toolchain: libFuzzer (libfuzzer-sys) with rustc's
# SanitizerCoverage pass, which stable rustc runs through `-C passes=sancov-module` (what
# cargo-fuzz does, less the nightly-only `-Z sanitizer`): edge counters, the PC table and
# comparison tracing guide the mutations. No ASan, so memory errors show only as crashes; the
# code fuzzed is safe Rust.
#
#   fuzz/run.sh TARGET SECONDS [libFuzzer flags...]   fuzz TARGET for SECONDS (0: until stopped)
#   fuzz/run.sh TARGET replay FILE...                 run TARGET once over saved inputs
#   fuzz/run.sh list                                  the targets
#   fuzz/run.sh build                                 only build every target
#
# New corpus entries go to fuzz/target-corpus/TARGET (not checked in; the checked-in seeds in
# fuzz/corpus/TARGET are read too); crashes to fuzz/artifacts/TARGET/. A crash becomes a
# regression test in the decoder's own crate, and a copy in fuzz/corpus/TARGET keeps the
# replay test (cargo test -p zkrs-fuzz) on it. Needs a C++ compiler (g++) for libFuzzer.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
triple="$(rustc -vV | sed -n 's/^host: //p')"
targets="$(cd "$here/libfuzzer/src/bin" && ls | sed 's/\.rs$//')"
build() {
  # --target: RUSTFLAGS then reach only the fuzzed code, not build scripts.
  RUSTFLAGS="-C passes=sancov-module -C llvm-args=-sanitizer-coverage-level=4 \
-C llvm-args=-sanitizer-coverage-inline-8bit-counters -C llvm-args=-sanitizer-coverage-pc-table \
-C llvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing" \
    cargo build --release --manifest-path "$here/libfuzzer/Cargo.toml" --target "$triple" \
    --target-dir "$here/libfuzzer/target" "$@"
}
case "${1:-}" in
  list) echo "$targets"; exit 0 ;;
  build) build; exit 0 ;;
  ""|-h|--help) sed -n '2,16p' "$0"; exit 2 ;;
esac
t="$1"
grep -qx "$t" <<<"$targets" || { echo "unknown target $t; fuzz/run.sh list" >&2; exit 2; }
build --bin "$t"
bin="$here/libfuzzer/target/$triple/release/$t"
if [ "${2:-}" = replay ]; then
  shift 2
  exec "$bin" "$@"
fi
secs="${2:?seconds}"
shift 2
mkdir -p "$here/target-corpus/$t" "$here/artifacts/$t"
exec "$bin" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$here/artifacts/$t/" "$@" "$here/target-corpus/$t" "$here/corpus/$t"
