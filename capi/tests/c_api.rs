//! Compiles `tests/c/api_test.c` with the system C compiler against the static library and
//! runs it against the SDK peers (`tests/peers`, installed by `tests/peers/setup.sh`): the
//! Python peer over stdio and over HTTP. With `MCPOLL_C_TEST_VALGRIND=1` the program runs
//! under valgrind memcheck (`--leak-check=full --error-exitcode=1`), as `.ci/run` does once.
//!
//! Without the peers installed the test says loudly that it was skipped; with
//! `MCPOLL_REQUIRE_PEERS=1` (CI) a missing install fails it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the static library needs from the system (`--print native-static-libs`).
pub const NATIVE_LIBS: &[&str] = &["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_owned()
}

/// `target/<profile>` of this test binary.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent().and_then(Path::parent).expect("profile dir").to_owned()
}

/// Builds the static library (this profile) and compiles `source` against it.
pub fn compile(source: &Path, out: &Path) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--quiet", "-p", "mcpoll-capi", "--lib"]);
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
    assert!(build.current_dir(workspace()).status().expect("cargo").success(), "cargo build");
    let lib = profile_dir().join("libmcpoll_capi.a");
    assert!(lib.exists(), "{} is missing", lib.display());
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let status = Command::new(cc)
        .args(["-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror"])
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

fn peers_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MCPOLL_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target").join("peers"));
    if dir.join("run-py-stdio.sh").exists() && dir.join(".venv").exists() {
        return Some(dir);
    }
    let msg = format!("SDK peers are not installed in {}: run tests/peers/setup.sh", dir.display());
    if std::env::var("MCPOLL_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
        panic!("{msg}");
    }
    eprintln!("\n!!!!!!!! SKIPPED C API test: {msg} !!!!!!!!\n");
    None
}

/// The Python SDK peer on Streamable HTTP, its process group killed when dropped.
struct HttpPeer {
    child: std::process::Child,
    port: u16,
}

impl HttpPeer {
    fn start(dir: &Path) -> Self {
        use std::os::unix::process::CommandExt;
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(dir.join("run-py-http.sh"))
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

#[test]
fn the_c_test_program_passes_against_the_sdk_peers() {
    let Some(peers) = peers_dir() else { return };
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/api_test.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcpoll_c_api_test");
    compile(&source, &exe);
    let peer = HttpPeer::start(&peers);
    let url = format!("http://127.0.0.1:{}/mcp", peer.port);
    let valgrind = std::env::var("MCPOLL_C_TEST_VALGRIND").is_ok_and(|v| v == "1");
    let mut command = if valgrind {
        let mut c = Command::new("valgrind");
        c.args(["--leak-check=full", "--error-exitcode=1", "--quiet"]).arg(&exe);
        c.env("MCPOLL_UNDER_VALGRIND", "1");
        c
    } else {
        Command::new(&exe)
    };
    let output = command.arg(&peers).arg(&url).output().expect("run the C test program");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(output.status.success(), "the C test program failed ({})", output.status);
    assert!(stdout.contains("checks passed"), "{stdout}");
    drop(peer);
}
