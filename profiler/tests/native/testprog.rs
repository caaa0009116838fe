//! pinprof-testprog: known blocking patterns for pinprof's lock and system call tests.
//!
//! Prints `ready <pid>`, waits for a line on stdin (so pinprof can attach first; prints
//! `go <time>` as it comes), runs the scenario named by its argument, prints what it measured
//! with CLOCK_MONOTONIC, then `idle <time>` and `done`, and waits for stdin to close.
//!
//! - `mutex N`: thread `holder` takes a pthread mutex, tells thread `waiter`, holds it 50 ms
//!   (in `hold_ledger`) and releases it; the waiter's `pthread_mutex_lock` waits meanwhile.
//!   Prints `waited <start> <end>` per round.
//! - `pipe N`: the main thread reads a pipe that a thread writes 30 ms later.
//!   Prints `read <start> <end>` per round.
//! - `mmap N`: 4 threads map and unmap memory for N hundred ms: the address space's lock in
//!   the kernel is contended. Prints `mapped <count>`.
//! - `fsync PATH N`: writes 1 MiB to PATH and fsyncs it, N times, keeping it open (as a log
//!   would be). Prints `fsync <start> <end>`.
//! - `sleep N`: thread `napper` spins 5 ms then sleeps 20 ms (in `nap`), N times.
//!   Prints `slept <start> <end>` per round, then the napper's own account of its life
//!   (`account <time> <cpu> <run-queue>` at its start and at its end, from the kernel's
//!   counters) and `lived <spawn> <joined>` around the whole thread.
//! - `stacks N`: thread `walker` sleeps 20 us N times, each time with a user stack of
//!   another path down a binary tree of calls (`left` or `right` at each of 16 levels, by the
//!   bits of a counter): up to 65,536 distinct stacks in turn. Prints
//!   `walked <sleeps> <distinct stacks>`.

use std::{
    io::{BufRead as _, Read as _, Write as _},
    sync::{Arc, Barrier},
    time::Duration,
};

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A pthread mutex shared by two threads.
struct Ledger(std::cell::UnsafeCell<libc::pthread_mutex_t>);

// SAFETY: a pthread mutex is made to be shared between threads.
unsafe impl Sync for Ledger {}

impl Ledger {
    fn lock(&self) {
        // SAFETY: initialised mutex, used only through these calls.
        unsafe { libc::pthread_mutex_lock(self.0.get()) };
    }

    fn unlock(&self) {
        // SAFETY: as above; the caller holds it.
        unsafe { libc::pthread_mutex_unlock(self.0.get()) };
    }
}

/// Holds the ledger for 50 ms: the release at its end is what wakes the waiter.
#[inline(never)]
fn hold_ledger(ledger: &Ledger, held: &Barrier) {
    ledger.lock();
    held.wait();
    std::thread::sleep(Duration::from_millis(50));
    ledger.unlock();
}

#[inline(never)]
fn wait_for_ledger(ledger: &Ledger, held: &Barrier) {
    held.wait();
    let start = now_ns();
    ledger.lock();
    let end = now_ns();
    ledger.unlock();
    println!("waited {start} {end}");
}

fn mutex(rounds: usize) {
    let ledger = Arc::new(Ledger(std::cell::UnsafeCell::new(
        libc::PTHREAD_MUTEX_INITIALIZER,
    )));
    for _ in 0..rounds {
        let held = Arc::new(Barrier::new(2));
        let (l, h) = (Arc::clone(&ledger), Arc::clone(&held));
        let holder = std::thread::Builder::new()
            .name("holder".into())
            .spawn(move || hold_ledger(&l, &h))
            .expect("spawn holder");
        let (l, h) = (Arc::clone(&ledger), Arc::clone(&held));
        let waiter = std::thread::Builder::new()
            .name("waiter".into())
            .spawn(move || wait_for_ledger(&l, &h))
            .expect("spawn waiter");
        holder.join().expect("holder");
        waiter.join().expect("waiter");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pipe(rounds: usize) {
    for _ in 0..rounds {
        let (mut reader, mut writer) = std::io::pipe().expect("pipe");
        let feeder = std::thread::Builder::new()
            .name("feeder".into())
            .spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                writer.write_all(b"x").expect("write the pipe");
            })
            .expect("spawn feeder");
        let mut byte = [0u8];
        let start = now_ns();
        reader.read_exact(&mut byte).expect("read the pipe");
        let end = now_ns();
        println!("read {start} {end}");
        feeder.join().expect("feeder");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn mmap(hundred_ms: usize) {
    let until = std::time::Instant::now() + Duration::from_millis(100 * hundred_ms as u64);
    let workers: Vec<_> = (0..4)
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("mapper-{i}"))
                .spawn(move || {
                    let mut count = 0u64;
                    while std::time::Instant::now() < until {
                        // SAFETY: an anonymous private mapping, touched, then unmapped.
                        unsafe {
                            let len = 1 << 20;
                            let p = libc::mmap(
                                std::ptr::null_mut(),
                                len,
                                libc::PROT_READ | libc::PROT_WRITE,
                                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                                -1,
                                0,
                            );
                            if p != libc::MAP_FAILED {
                                *(p as *mut u8) = 1;
                                libc::munmap(p, len);
                            }
                        }
                        count += 1;
                    }
                    count
                })
                .expect("spawn mapper")
        })
        .collect();
    let total: u64 = workers.into_iter().map(|w| w.join().expect("mapper")).sum();
    println!("mapped {total}");
}

fn fsync(path: &str, rounds: usize) -> std::fs::File {
    let data = vec![7u8; 1 << 20];
    let mut file = std::fs::File::create(path).expect("create the file");
    for _ in 0..rounds {
        file.write_all(&data).expect("write the file");
        let start = now_ns();
        file.sync_all().expect("fsync");
        let end = now_ns();
        println!("fsync {start} {end}");
    }
    file
}

/// Levels of the `stacks` tree.
const STACK_LEVELS: usize = 16;

/// Sleeps 20 us with a user stack that says `path`: the frame chain the kernel's walk follows
/// (from rbp: the caller's rbp, then its return address) is laid out here, one frame per
/// level whose return address is in `left` or `right` by bit `level` of the path, as a
/// recursion through them built with frame pointers would leave it (the test binary is built
/// without frame pointers, and libc keeps none either). The system call is made from here.
#[inline(never)]
fn sleep_in_path(path: u32) {
    let mut frames = [0u64; 2 * (STACK_LEVELS + 1)];
    let base = frames.as_mut_ptr() as u64;
    for level in 0..STACK_LEVELS {
        let at = 2 * level;
        let caller = if path & (1 << level) == 0 {
            left as *const () as u64
        } else {
            right as *const () as u64
        };
        // The next frame's address, then a return address inside the caller.
        frames[at] = base + 8 * (at as u64 + 2);
        frames[at + 1] = caller + 4;
    }
    let nap = libc::timespec {
        tv_sec: 0,
        tv_nsec: 20_000,
    };
    // SAFETY: nanosleep with a valid timespec and no remainder; rbp is saved on the stack
    // and restored, the kernel clobbers rcx and r11 only, and `frames` outlives the call.
    unsafe {
        std::arch::asm!(
            "push rbp",
            "mov rbp, {chain}",
            "syscall",
            "pop rbp",
            chain = in(reg) base,
            inlateout("rax") libc::SYS_nanosleep => _,
            in("rdi") &nap as *const libc::timespec,
            in("rsi") 0usize,
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    std::hint::black_box(&frames);
}

/// Stand-ins for the two callers a path goes through (their addresses name its frames).
#[inline(never)]
fn left() {
    std::hint::black_box(1);
}

#[inline(never)]
fn right() {
    std::hint::black_box(2);
}

/// Sleeps `sleeps` times, each down the next path of the tree (round and round).
fn stacks(sleeps: usize) {
    std::thread::Builder::new()
        .name("walker".into())
        .spawn(move || {
            for leaf in 0..sleeps {
                sleep_in_path((leaf % (1 << STACK_LEVELS)) as u32);
            }
            println!("walked {sleeps} {}", sleeps.min(1 << STACK_LEVELS));
        })
        .expect("spawn walker")
        .join()
        .expect("walker");
}

/// Busy 5 ms, then asleep 20 ms: the sleeps are the thread's off-CPU time.
fn nap(rounds: usize) {
    let spawned = now_ns();
    std::thread::Builder::new()
        .name("napper".into())
        .spawn(move || {
            let from = Account::now();
            for _ in 0..rounds {
                let spin = now_ns();
                while now_ns() - spin < 5_000_000 {
                    std::hint::spin_loop();
                }
                let start = now_ns();
                std::thread::sleep(Duration::from_millis(20));
                let end = now_ns();
                println!("slept {start} {end}");
            }
            let to = Account::now();
            println!(
                "account {} {} {} {} {} {}",
                from.time_ns, from.run_ns, from.wait_ns, to.time_ns, to.run_ns, to.wait_ns
            );
        })
        .expect("spawn napper")
        .join()
        .expect("napper");
    println!("lived {spawned} {}", now_ns());
}

/// The kernel's account of the calling thread: its CPU time (exact, from the clock) and its
/// time waiting for a CPU (from schedstat, which is current while the thread runs).
struct Account {
    time_ns: u64,
    run_ns: u64,
    wait_ns: u64,
}

impl Account {
    fn now() -> Self {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid out-pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        let run_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
        let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        let wait_ns = schedstat
            .split_whitespace()
            .nth(1)
            .and_then(|w| w.parse().ok())
            .unwrap_or(0);
        Account {
            time_ns: now_ns(),
            run_ns,
            wait_ns,
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let number = |i: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(5);
    println!("ready {}", std::process::id());
    let stdin = std::io::stdin();
    let mut line = String::new();
    let _ = stdin.lock().read_line(&mut line);
    println!("go {}", now_ns());
    // Kept open until the end, like a log.
    let mut _log = None;
    match args.get(1).map(String::as_str) {
        Some("mutex") => mutex(number(2)),
        Some("pipe") => pipe(number(2)),
        Some("mmap") => mmap(number(2)),
        Some("sleep") => nap(number(2)),
        Some("stacks") => stacks(number(2)),
        Some("fsync") => {
            let path = args.get(2).map_or("/tmp/pinprof-fsync", String::as_str);
            _log = Some(fsync(path, number(3)));
        }
        other => {
            eprintln!(
                "usage: pinprof-testprog mutex|pipe|mmap|fsync|sleep|stacks ... (got {other:?})"
            );
            std::process::exit(2);
        }
    }
    println!("idle {}", now_ns());
    println!("done");
    let _ = std::io::stdout().flush();
    // Stay alive until the test closes stdin, so the recording can finish first.
    let _ = stdin.lock().read_line(&mut line);
}
