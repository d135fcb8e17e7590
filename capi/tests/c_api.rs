//! Compiles `tests/c/api_test.c` with the system C compiler against the static library and
//! runs it against the SDK peers (`tests/peers`, installed by `tests/peers/setup.sh`): the
//! Python peer over stdio and over HTTP, and servers that break the protocol on purpose
//! (`tests/c/odd_server.py` on stdio, `tests/c/odd_http.py` on HTTP) for the error results a
//! well-behaved peer never causes. With `MCPOLL_C_TEST_VALGRIND=1` the program runs
//! under valgrind memcheck (`--leak-check=full --error-exitcode=1`), as `.ci/run` does once.
//!
//! Needs the peers (`tests/peers/setup.sh`); `MCPOLL_SKIP_PEERS=1` skips it.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

#[test]
fn the_c_test_program_passes_against_the_sdk_peers() {
    let Some(peers) = peers_dir() else { return };
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/api_test.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcpoll_c_api_test");
    compile(&source, &exe);
    let peer = HttpPeer::start(&peers);
    let url = format!("http://127.0.0.1:{}/mcp", peer.port);
    // Not an MCP server: Python's own HTTP server, which answers every POST with 501.
    let plain = PlainHttp::start();
    let plain_url = format!("http://127.0.0.1:{}/mcp", plain.port);
    // The Python SDK as an OAuth-protected resource whose authorization server (its issuer,
    // port 9 of loopback) is not there: a wrong token is refused, and the OAuth flow fails.
    let auth = HttpPeer::start_with(
        &peers,
        "run-py-auth-http.sh",
        &[("MCPOLL_AUTH_ISSUER", "http://127.0.0.1:9")],
    );
    let auth_url = format!("http://127.0.0.1:{}/mcp", auth.port);
    let valgrind = std::env::var("MCPOLL_C_TEST_VALGRIND").is_ok_and(|v| v == "1");
    let mut command = if valgrind {
        let mut c = Command::new("valgrind");
        c.args(["--leak-check=full", "--error-exitcode=1", "--quiet"]).arg(&exe);
        c.env("MCPOLL_UNDER_VALGRIND", "1");
        c
    } else {
        Command::new(&exe)
    };
    // The library of this profile has the panic test hook when it has debug assertions.
    if cfg!(debug_assertions) {
        command.env("MCPOLL_C_TEST_HOOKS", "1");
    }
    let odd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/odd_server.py");
    // An HTTP server that breaks the protocol on purpose, a path per way.
    let odd_http = OddHttp::start();
    let odd_http_url = format!("http://127.0.0.1:{}", odd_http.port);
    command.arg(&peers).arg(&url).arg(&plain_url).arg(&auth_url).arg(&odd).arg(&odd_http_url);
    let output = command.output();
    let output = output.expect("run the C test program");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(output.status.success(), "the C test program failed ({})", output.status);
    assert!(stdout.contains("checks passed"), "{stdout}");
    drop(peer);
    drop(plain);
    drop(auth);
    drop(odd_http);
}

/// `python3 -m http.server` on a free loopback port, serving an empty folder; its process
/// group is killed when dropped.
struct PlainHttp {
    child: std::process::Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl PlainHttp {
    fn start() -> Self {
        use std::os::unix::process::CommandExt;
        use std::time::{Duration, Instant};
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("plain-{port}"));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1", "--directory"])
            .arg(&dir)
            .arg(port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .expect("python3 -m http.server");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "python3 -m http.server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, port, dir }
    }
}

impl Drop for PlainHttp {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `tests/c/odd_http.py`, listening on the loopback port it chose and printed; its process
/// group is killed when dropped.
struct OddHttp {
    child: std::process::Child,
    port: u16,
}

impl OddHttp {
    fn start() -> Self {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/odd_http.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .process_group(0)
            .spawn()
            .expect("python3 tests/c/odd_http.py");
        // The first line is the port, printed once the socket listens.
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let mut server = Self { child, port: 0 };
        server.port = line.trim().parse().unwrap_or_else(|_| panic!("odd_http.py said {line:?}"));
        server
    }
}

impl Drop for OddHttp {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.wait();
    }
}
