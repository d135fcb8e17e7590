//! The C and Python examples (`examples/c`, `examples/python`) and the README's C program,
//! built and run as a user would: the C ones compiled with the system C compiler against the
//! static library (the C++ one with c++, through `include/mcpoll.hpp`), the Python one loading the shared library with `ctypes`. Servers: the demo
//! server over stdio, and for the game loop also the Python SDK peer over HTTP.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

fn example(name: &str) -> PathBuf {
    workspace().join("examples").join(name)
}

/// Compiles `examples/c/NAME.c` (or `examples/cpp/NAME.cpp` for `cpp/NAME`) into the test's
/// scratch folder.
fn compiled(name: &str) -> PathBuf {
    let exe =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("example_{}", name.replace('/', "_")));
    let source = match name.strip_prefix("cpp/") {
        Some(cpp) => example(&format!("cpp/{cpp}.cpp")),
        None => example(&format!("c/{name}.c")),
    };
    compile(&source, &exe);
    exe
}

#[track_caller]
fn success(output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}: {stdout}\n{stderr}", output.status);
    stdout
}

#[test]
fn the_readme_program_is_examples_c_hello_and_says_hello() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let hello = std::fs::read_to_string(example("c/hello.c")).unwrap();
    assert!(
        readme.contains(&format!("```c\n{hello}```")),
        "README's C program != examples/c/hello.c"
    );
    let out = success(Command::new(compiled("hello")).arg(demo_server()).output().unwrap());
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["content"][0]["text"], "hello", "{out}");
}

#[test]
fn the_cpp_layer_calls_and_turns_results_into_exceptions() {
    let out = success(Command::new(compiled("cpp/hello")).arg(demo_server()).output().unwrap());
    assert!(out.starts_with("refused: not JSON\n"), "{out}");
    let v: serde_json::Value = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
    assert_eq!(v["content"][0]["text"], "hello from C++", "{out}");
}

#[test]
fn the_game_loop_calls_stdio_and_http_servers_every_frame_budget() {
    let exe = compiled("game_loop");
    let out = success(Command::new(&exe).args(["60", "-"]).arg(demo_server()).output().unwrap());
    assert!(out.contains("stdio: ") && !out.contains("stdio: 0 calls"), "{out}");
    let Some(peers) = peers_dir() else { return };
    let peer = HttpPeer::start(&peers);
    let url = format!("http://127.0.0.1:{}/mcp", peer.port);
    let out = success(Command::new(&exe).args(["180", &url]).arg(demo_server()).output().unwrap());
    assert!(!out.contains("stdio: 0 calls") && !out.contains("http: 0 calls"), "{out}");
    assert!(out.contains("http: "), "{out}");
}

#[test]
fn the_poll_loop_serves_its_socket_and_the_host() {
    let out =
        success(Command::new(compiled("poll_loop")).arg("50").arg(demo_server()).output().unwrap());
    assert!(out.contains("calls answered: 50, datagrams: 50"), "{out}");
}

#[test]
fn the_python_asyncio_example_runs_ten_calls() {
    build_library();
    let lib = profile_dir().join("libmcpoll_capi.so");
    let out = success(
        Command::new("python3")
            .arg(example("python/asyncio_host.py"))
            .arg(&lib)
            .arg(demo_server())
            .output()
            .expect("python3"),
    );
    for i in 0..10 {
        assert!(out.contains(&format!("asyncio {i}\n")), "{out}");
    }
}
