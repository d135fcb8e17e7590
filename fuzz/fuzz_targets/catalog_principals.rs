#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpoll::internal::catalog_fuzz::catalog_principals(data));
