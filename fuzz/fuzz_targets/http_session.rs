#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpoll::internal::fuzzing::http_session(data));
