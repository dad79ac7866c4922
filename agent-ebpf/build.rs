//! Linker settings of the eBPF object (aya-build sets the compiler's flags itself, so they go here).

fn main() {
    // bpf-linker asks LLVM to expand memcpy "in order" by default, which also turns off LLVM's
    // inline expansion of memset: every zeroed struct or array (a thread name, an event's spare
    // fields, a label buffer) became a call to compiler_builtins' byte-at-a-time memset, a loop the
    // verifier walks byte by byte on every path that reaches it (12,103 of the native on-CPU
    // program's 99,923 verified instructions) and the CPU runs byte by byte. Without the flag LLVM
    // emits plain stores for both, up to its 128-store limit, as clang does for C programs.
    println!("cargo:rustc-link-arg=--disable-expand-memcpy-in-order");
    println!("cargo:rerun-if-changed=build.rs");
}
