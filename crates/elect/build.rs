//! Links the `elect` binary as a position-dependent executable on Linux
//! (ADR 0083): its 30,500 relative relocations are then resolved by the
//! linker, not by the dynamic loader at every start, and the 127 pages of
//! `.data.rel.ro` they wrote (a copy-on-write fault each) are read-only
//! page-cache pages. The executable's own image then has no address
//! randomization (libraries, the heap and the stacks keep theirs).
//! `ELECT_PIE=1` at build time keeps the default (a PIE).

fn main() {
    println!("cargo:rerun-if-env-changed=ELECT_PIE");
    println!("cargo:rerun-if-changed=build.rs");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let gnu = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "gnu");
    let keep_pie = std::env::var_os("ELECT_PIE").is_some_and(|v| v == "1");
    if linux && gnu && !keep_pie {
        println!("cargo:rustc-link-arg-bin=elect=-no-pie");
    }
}
