//! Shared by the C ABI's integration tests: building the static library, compiling C
//! against it, the SDK peers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the static library needs from the system (`--print native-static-libs`).
pub const NATIVE_LIBS: &[&str] = &["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl"];

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_owned()
}

/// `target/<profile>` of this test binary.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent().and_then(Path::parent).expect("profile dir").to_owned()
}

/// `cargo build --quiet ARGS` in this profile, from the workspace root.
pub fn cargo_build(args: &[&str]) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--quiet"]).args(args);
    // The variables cargo sets for this test: ring's build script tracks
    // `CARGO_MANIFEST_DIR`, so with them the library would be rebuilt at every run.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let per_test = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CRATE_", "CARGO_BIN_"];
        if per_test.iter().any(|p| name.starts_with(p)) || name == "CARGO_TARGET_TMPDIR" {
            build.env_remove(&*name);
        }
    }
    if profile_dir().ends_with("release") {
        build.arg("--release");
    }
    let status = build.current_dir(workspace()).status().expect("cargo");
    assert!(status.success(), "cargo build {args:?}");
}

/// Builds the library (this profile): `cargo build -p mcpoll-capi --lib` (static and shared).
pub fn build_library() {
    cargo_build(&["-p", "mcpoll-capi", "--lib"]);
}

/// The demo server (`tests/peers/demo`), built in this profile.
pub fn demo_server() -> PathBuf {
    cargo_build(&["-p", "mcpoll-demo-server"]);
    let path = profile_dir().join("demo_server");
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// Builds the static library (this profile) and compiles `source` against it.
pub fn compile(source: &Path, out: &Path) {
    build_library();
    let lib = profile_dir().join("libmcpoll_capi.a");
    assert!(lib.exists(), "{} is missing", lib.display());
    // C with the system cc, C++ (the `mcpoll.hpp` layer) with the system c++.
    let cpp = source.extension().is_some_and(|e| e == "cpp");
    let (var, default, std) =
        if cpp { ("CXX", "c++", "-std=c++17") } else { ("CC", "cc", "-std=c11") };
    let compiler = std::env::var_os(var).unwrap_or_else(|| default.into());
    let status = Command::new(compiler)
        .args([std, "-g", "-O1", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("include"))
        .arg(source)
        .arg(&lib)
        .args(NATIVE_LIBS)
        .arg("-o")
        .arg(out)
        .status()
        .expect("run the C compiler");
    assert!(status.success(), "compiling {} failed", source.display());
}

pub fn peers_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MCPOLL_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target").join("peers"));
    if dir.join("run-py-stdio.sh").exists() && dir.join(".venv").exists() {
        return Some(dir);
    }
    // As in the root crate's tests: a missing install fails (the harness hides a printed
    // notice), unless the run opts out.
    if std::env::var("MCPOLL_SKIP_PEERS").is_ok_and(|v| v == "1") {
        return None;
    }
    panic!(
        "SDK peers are not installed in {}: run tests/peers/setup.sh, or set \
         MCPOLL_SKIP_PEERS=1 to run without them",
        dir.display()
    );
}

/// The Python SDK peer on Streamable HTTP, its process group killed when dropped.
pub struct HttpPeer {
    child: std::process::Child,
    pub port: u16,
}

impl HttpPeer {
    pub fn start(dir: &Path) -> Self {
        Self::start_with(dir, "run-py-http.sh", &[])
    }

    /// The peer script `script` of `dir` with `env` added to its environment.
    pub fn start_with(dir: &Path, script: &str, env: &[(&str, &str)]) -> Self {
        use std::os::unix::process::CommandExt;
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(dir.join(script))
            .envs(env.iter().copied())
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start the HTTP peer");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the HTTP peer did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, port }
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.wait();
    }
}
