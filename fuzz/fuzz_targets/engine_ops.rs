#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpoll::fuzzing::engine_ops(data));
