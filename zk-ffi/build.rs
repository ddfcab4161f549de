//! Compiles the C shim (log_message is C-variadic, which stable Rust cannot define) and gives the
//! shared library the soname programs linked against Apache's client ask for.

fn main() {
    // libzkrs always has the synchronous calls; the cfg only marks them in src/ext.rs so that
    // cbindgen writes them under `#if defined(THREADED)` in zkrs_ext.h, as zookeeper.h has them.
    println!("cargo::rustc-check-cfg=cfg(threaded)");
    println!("cargo:rustc-cfg=threaded");
    println!("cargo:rerun-if-changed=csrc/log_message.c");
    cc::Build::new().file("csrc/log_message.c").flag_if_supported("-fvisibility=hidden").compile("zkrs_shim");
    // Programs built against Apache's library record libzookeeper_mt.so.2 as NEEDED; with this soname
    // a symlink of that name to libzkrs.so is accepted by the dynamic loader as the same library.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libzookeeper_mt.so.2");
}
