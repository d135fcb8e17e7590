#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpoll::fuzzing::json_scan(data));
