//! Fuzz target: streaming scanner + parser on arbitrary bytes (see `aicard::commands::fuzz`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    aicard::commands::fuzz::scan_parse(data);
});
