//! Compiles `tests/c/api_test.c` with the system C compiler against the static library and
//! runs it against the SDK peers (`tests/peers`, installed by `tests/peers/setup.sh`): the
//! Python peer over stdio and over HTTP. With `MCPOLL_C_TEST_VALGRIND=1` the program runs
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
    let output = command.arg(&peers).arg(&url).output().expect("run the C test program");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(output.status.success(), "the C test program failed ({})", output.status);
    assert!(stdout.contains("checks passed"), "{stdout}");
    drop(peer);
}
