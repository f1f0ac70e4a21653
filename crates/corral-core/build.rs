//! Builds the keeper program (crates/corral-keeper) for the target and puts its bytes where
//! `sandbox/session/binary.rs` includes them. Linux only: elsewhere the file is empty.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let keeper = manifest_dir.join("../corral-keeper");
    println!("cargo:rerun-if-changed={}", keeper.join("src").display());
    println!("cargo:rerun-if-changed={}", keeper.join("Cargo.toml").display());
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let dest = out.join("corral-keeper");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        std::fs::write(&dest, b"").expect("write the empty keeper");
        return;
    }
    let target = std::env::var("TARGET").expect("TARGET");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target_dir = out.join("keeper-target");
    // The same toolchain, linker settings (the cross builds' `CARGO_TARGET_<T>_LINKER`) and
    // jobserver as this build; not this crate's own rustflags, which cargo passes encoded.
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--profile", "keeper", "--target", &target, "--manifest-path"])
        .arg(keeper.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .status()
        .expect("run cargo to build the keeper");
    assert!(status.success(), "building the keeper (crates/corral-keeper) failed");
    let built = target_dir.join(&target).join("keeper").join("corral-keeper");
    std::fs::copy(&built, &dest).unwrap_or_else(|e| panic!("copy {}: {e}", built.display()));
}
