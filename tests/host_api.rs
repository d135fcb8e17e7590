//! The API a host writes against (issue 24), through the public API only: tool arguments as
//! text and the empty-arguments shortcut.

mod common;

use common::counting::{allocs, Counting};
use common::{demo_server, raw, start};
use mcpoll::{BlockingError, CallOptions, Config, Host, RequestError};

#[global_allocator]
static GLOBAL: Counting = Counting;

// ----- 5. arguments as text --------------------------------------------------------------------

#[test]
fn tool_arguments_as_text_are_checked_once_and_sent_as_they_are() {
    let mut host = Host::new().unwrap();
    let server = start(&mut host, demo_server(), Config::default());
    let opts = CallOptions::default();

    // Nested values and whitespace around the object: no RawValue, no serde_json in sight.
    let args = " \n{\"text\":\"hi\",\"extra\":{\"n\":[1,{\"m\":null}]}}\t";
    let result = host.call_tool_json_blocking(server, "echo", args, &opts).unwrap();
    assert!(result.json.contains("\"hi\""), "{}", result.json);
    assert!(!result.is_error);

    // The empty-arguments shortcut: `fail` takes none and answers isError.
    let call = host.call_tool_no_args(server, "fail", &opts).unwrap();
    let result = host.wait(server, call).unwrap();
    assert!(result.is_error, "{}", result.json);

    // Refused before anything is sent, each with its own reason.
    let before = host.pending(server).unwrap();
    for (text, expected) in [
        (r#"{"text":"#, RequestError::ArgumentsNotJson),
        (r#"{"text":"a"} x"#, RequestError::ArgumentsNotJson),
        ("", RequestError::ArgumentsNotJson),
        ("[1]", RequestError::ArgumentsNotObject),
        (r#""{}""#, RequestError::ArgumentsNotObject),
    ] {
        assert_eq!(host.call_tool_json(server, "echo", text, &opts), Err(expected), "{text:?}");
        match host.call_tool_json_blocking(server, "echo", text, &opts) {
            Err(BlockingError::Request(e)) => assert_eq!(e, expected, "{text:?}"),
            other => panic!("{text:?}: {other:?}"),
        }
    }
    assert_eq!(host.pending(server), Some(before));
}

/// Starting a call from text allocates no more than starting it from a `RawValue` (nothing,
/// once warm), nested arguments included: the check is one scan that builds nothing.
#[test]
fn a_call_from_text_allocates_no_more_than_one_from_a_raw_value() {
    const CALLS: u64 = 20;
    let mut host = Host::new().unwrap();
    let server = start(&mut host, demo_server(), Config::default());
    let opts = CallOptions::default();
    let text = r#"{"text":"hi","extra":{"n":[1,{"m":[true,false]}],"o":{"p":{"q":"\u00e9"}}}}"#;
    let value = raw(text);
    let run = |host: &mut Host, from_text: bool| {
        let mut spent = 0;
        for _ in 0..CALLS {
            let before = allocs();
            let call = if from_text {
                host.call_tool_json(server, "echo", text, &opts).unwrap()
            } else {
                host.call_tool(server, "echo", &value, &opts).unwrap()
            };
            spent += allocs() - before;
            host.wait(server, call).unwrap();
        }
        spent
    };
    // Warm up both paths (buffers, pending table slots, the pipe's write buffer).
    run(&mut host, true);
    run(&mut host, false);
    let from_raw = run(&mut host, false);
    let from_text = run(&mut host, true);
    eprintln!(
        "allocations to start {CALLS} calls: from text {from_text}, from RawValue {from_raw}"
    );
    assert!(from_text <= from_raw, "text {from_text} > RawValue {from_raw}");
    assert_eq!(from_text, 0, "starting a warm call from text allocated");
}
