#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpoll::internal::fuzzing::oauth_token_response(data));
