//! Building this workspace's binaries from a test or bench process, so none runs a stale one.
//! Shared by the integration tests (`tests/common/mod.rs`) and the roundtrip bench, which
//! includes this file by path.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The profile folder of the running test or bench (`target/debug`, `target/release`): cargo
/// puts their executables in its `deps/`, and the binaries it builds beside `deps/`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(|deps| deps.parent()).expect("target profile dir");
    dir.to_owned()
}

/// Runs `cargo build --quiet ARGS` in this package's folder (the cargo that runs us, when it
/// says which).
pub fn cargo_build(args: &[&str]) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["build", "--quiet"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build {args:?} failed");
}

/// The demo server (`tests/peers/demo`, a workspace member that `cargo test` here does not
/// build), built by `cargo build -p mcpoll-demo-server` the first time a process asks, so an
/// edit to it always reaches the tests. `profile_args` must build into the caller's profile
/// folder: `[]` from `target/debug`, `["--release"]` or `["--profile", "bench"]` from
/// `target/release`.
pub fn demo_server_bin(profile_args: &[&str]) -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        cargo_build(&[&["-p", "mcpoll-demo-server"], profile_args].concat());
        let path = profile_dir().join("demo_server");
        assert!(path.exists(), "{} is missing", path.display());
        path
    })
}
