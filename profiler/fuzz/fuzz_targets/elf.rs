//! Any bytes as an ELF file the target maps: every third-party parser pinprof calls on the
//! target's files (blazesym's symbols, object's sections, framehop's unwind tables walked from
//! inside the mapping, libjvm's symbol lookup), at its door (`parser_guard`), must end without
//! a panic past the door, a hang or an unbounded allocation (libFuzzer's -timeout and
//! -rss_limit_mb catch the last two). A panic the door catches costs that file only.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use profiler::{
    jvm::memory::elf_symbols,
    mappings::{Mapping, SealedFile},
    symbolize::ElfSymbols,
    unwind::NativeUnwinder,
};

const BASE: u64 = 0x5000_0000_0000;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = SealedFile::from_bytes(data) else {
        return;
    };
    let file = Arc::new(file);
    let len = (data.len() as u64).next_multiple_of(0x1000);
    // As a shared library is mapped: its first page, then the rest executable.
    let mut unwinder = NativeUnwinder::default();
    for (start, end, offset) in [
        (BASE, BASE + 0x1000, 0),
        (BASE + 0x1000, BASE + len.max(0x2000), 0x1000),
    ] {
        unwinder.add_mapping(&Mapping {
            start,
            end,
            offset,
            path: "fuzz.so".into(),
            file: Some(Arc::clone(&file)),
        });
    }
    let places = [
        0,
        0x10,
        0x1000,
        0x1234,
        data.len() as u64 / 2,
        data.len() as u64,
    ];
    let _ = ElfSymbols::default().names(&file, "fuzz.so", &places);
    let stack: Vec<u8> = data.iter().rev().take(4096).copied().collect();
    let sp = 0x7ff0_0000_0000;
    for place in places {
        let _ = unwinder.walk(BASE + place, sp, sp + 64, &stack);
    }
    let _ = elf_symbols(
        "fuzz.so",
        data,
        BASE,
        &["JNI_CreateJavaVM", "gHotSpotVMStructs"],
    );
});
