#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpoll::internal::fuzzing::oauth_metadata(data));
