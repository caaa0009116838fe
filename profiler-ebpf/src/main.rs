//! pinprof's kernel programs. Built for the BPF target by `profiler/build.rs`.
//!
//! Off-CPU: at `sched_switch` the outgoing thread of the target is stamped (time, state, stacks)
//! in `STARTS`; when it is switched back in, the interval goes to user space through `EVENTS`,
//! or, if shorter than `MIN_OFF_CPU_NS`, is only summed per thread in `SHORT_OFF_CPU`.
//! `sched_wakeup` notes who woke a stamped thread.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]

#[cfg(target_arch = "bpf")]
mod programs;

// On the host this binary is an empty shell, so that `cargo check --workspace` works.
#[cfg(not(target_arch = "bpf"))]
fn main() {}
