#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpoll::internal::fuzzing::dpop_server_input(data));
