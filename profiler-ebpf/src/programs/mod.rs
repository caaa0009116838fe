//! The kernel programs, one file for each thing they trace, and the settings and maps they share.

// User space finds each program, map and setting by its name in the object: keep the names.
mod ids;
mod java_stacks;
mod java_state;
mod locks;
mod maps;
mod memory;
mod oncpu;
mod scheduler;
mod settings;
mod stacks;
mod syscalls;
mod threads;
mod vthreads;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
