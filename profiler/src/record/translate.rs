//! Translation of the kernel's raw records into the recording's events: intervals off CPU,
//! system calls, thread names and lives, and what is still open as capture stops.

use std::collections::HashSet;

use anyhow::Result;

use super::Session;
use crate::{
    capture::Raw,
    events::{
        Event, FutexWait, FutexWaker, JavaBlock, JavaThreadState, LateWakeup, OffCpu, OffCpuState,
        OnCpu, Syscall, ThreadCpu, ThreadName,
    },
    fdname,
    jvm::hotspot::ThreadStates,
};

/// A system call still under way as capture stops.
struct UnfinishedCall {
    tid: u32,
    nr: u32,
    args: [u64; 4],
    start_ns: u64,
    /// A futex wait's timeout (None inside: none, or not known); None: not a futex wait.
    futex_timeout_ns: Option<Option<u64>>,
}

/// The name of an x86_64 system call number.
pub(super) fn syscall_name(nr: u32) -> String {
    syscalls::Sysno::new(nr as usize)
        .map(|s| s.name().to_string())
        .unwrap_or_else(|| format!("syscall_{nr}"))
}

fn thread_state(states: &ThreadStates, raw: u32) -> JavaThreadState {
    match raw {
        s if s == states.in_native => JavaThreadState::InNative,
        s if s == states.in_vm => JavaThreadState::InVm,
        s if s == states.in_java => JavaThreadState::InJava,
        s if s == states.blocked => JavaThreadState::Blocked,
        s => JavaThreadState::Other(s),
    }
}

impl Session {
    /// Records raw kernel records, taking them from `raws`; true once the target has exited.
    /// Once `ended` says the recording must end, the records not handled yet are left in
    /// `raws` (each can be made slow to handle: a stack to name, a thread to read).
    pub(super) fn handle(&mut self, raws: &mut Vec<Raw>, ended: &dyn Fn() -> bool) -> Result<bool> {
        let mut exited = false;
        // Births first: the JVM lists a new Java thread before it starts it, and what follows
        // (naming and walking stacks) can take a while, during which the new thread blocks.
        if let Some(watch) = &self.watch {
            for raw in raws.iter() {
                if let Raw::ThreadStart(life) = raw {
                    watch.born(life.tid);
                }
            }
        }
        let mut handled = raws.len();
        for (i, raw) in raws.iter().enumerate() {
            if i % 16 == 0 && ended() {
                handled = i;
                break;
            }
            // (Cheap: the watch has read the list; this writes what it read, in order.)
            self.refresh_java_threads()?;
            match raw {
                Raw::OffCpu(e) => {
                    let event = OffCpu {
                        tid: e.tid,
                        start_ns: e.start_ns,
                        end_ns: e.end_ns,
                        state: OffCpuState::from_prev_state(e.prev_state),
                        // Both taken as the wait began.
                        kernel_stack: self.stack(e.kernel_stack_id, true, e.start_ns)?,
                        user_stack: self.stack(e.user_stack_id, false, e.start_ns)?,
                        waker_tid: (e.waker_tid != 0).then_some(e.waker_tid),
                        cpu: e.cpu,
                        java: self.java_block(&e.java),
                    };
                    if let Some(java) = &event.java {
                        for monitor in [java.pending_monitor, java.waiting_monitor]
                            .into_iter()
                            .flatten()
                        {
                            self.name_monitor(monitor, e.start_ns)?;
                        }
                    }
                    self.thread(e.tid)?;
                    self.writer.write_event(&Event::OffCpu(event))?;
                    self.events += 1;
                    if e.java.park_blocker != 0 {
                        self.name_blocker(e.tid, e.start_ns, e.end_ns, e.java.park_blocker)?;
                    }
                    self.blocked_stack_done(e);
                }
                Raw::StackCopy(copy) => {
                    self.blocked_stack_copied(&copy.head);
                    self.java_stack(copy, None)?
                }
                Raw::StackChunkCopy(copy) => {
                    self.blocked_stack_copied(&copy.stack.head);
                    self.java_stack(&copy.stack, Some((&copy.chunk_head, &copy.chunk)))?
                }
                Raw::Syscall(e) => self.syscall(e)?,
                Raw::VthreadWait(w) => self.vthread_wait(w)?,
                Raw::NativeStack(copy) => self.native_stack(copy)?,
                Raw::Rename(r) => {
                    let end = r.comm.iter().position(|&b| b == 0).unwrap_or(r.comm.len());
                    let name = String::from_utf8_lossy(&r.comm[..end]).into_owned();
                    self.known_threads.insert(r.tid);
                    self.writer
                        .write_event(&Event::Thread(ThreadName { tid: r.tid, name }))?;
                }
                Raw::ThreadStart(life) => {
                    // An id used again is a new thread, to be named as one.
                    self.recently_exited.remove(life.tid);
                    self.writer.write_event(&Event::ThreadStart {
                        tid: life.tid,
                        time_ns: life.time_ns,
                    })?;
                }
                Raw::ThreadExit(life) => {
                    // The set stays as large as the threads alive, not as all the target ever
                    // started (and an id used again is named again); the recently gone are
                    // remembered a while, since others' events name them after their exit (a
                    // waker, a lock's holder), when their name can no longer be read.
                    if self.known_threads.remove(&life.tid) {
                        self.recently_exited.insert(life.tid);
                    }
                    if self.copy_ends.forget(life.tid) {
                        self.capture.set_copy_end(life.tid, None);
                    }
                    let known = life.run_ns != u64::MAX && life.wait_ns != u64::MAX;
                    self.writer.write_event(&Event::ThreadExit {
                        tid: life.tid,
                        time_ns: life.time_ns,
                        account: known.then_some(ThreadCpu {
                            tid: life.tid,
                            run_ns: life.run_ns,
                            wait_ns: life.wait_ns,
                        }),
                    })?;
                }
                Raw::OnCpu(e) => {
                    let sample = OnCpu {
                        tid: e.tid,
                        time_ns: e.time_ns,
                        cpu: e.cpu,
                        kernel_stack: self.stack(e.kernel_stack_id, true, e.time_ns)?,
                        user_stack: self.stack(e.user_stack_id, false, e.time_ns)?,
                        java: self.java_block(&e.java),
                    };
                    self.thread(e.tid)?;
                    self.writer.write_event(&Event::OnCpu(sample))?;
                    self.events += 1;
                }
                Raw::LateWakeup(e) => {
                    let late = LateWakeup {
                        tid: e.tid,
                        wake_ns: e.wake_ns,
                        run_ns: e.run_ns,
                        waker_tid: (e.waker_tid != 0).then_some(e.waker_tid),
                        cpu: e.cpu,
                    };
                    self.thread(e.tid)?;
                    if let Some(waker) = late.waker_tid {
                        self.thread(waker)?;
                    }
                    self.writer.write_event(&Event::LateWakeup(late))?;
                    self.events += 1;
                }
                Raw::Exit(e) => {
                    self.writer
                        .write_event(&Event::TargetExit { time_ns: e.time_ns })?;
                    self.exit_ns = Some(e.time_ns);
                    exited = true;
                }
            }
        }
        for raw in raws.drain(..handled) {
            self.capture.recycle(raw);
        }
        Ok(exited)
    }

    /// Records a long system call or futex wait, naming its call, its file and its stacks.
    fn syscall(&mut self, e: &profiler_ebpf::SyscallEvent) -> Result<()> {
        let name = syscall_name(e.nr);
        let fd = fdname::takes_fd(&name)
            .then(|| self.fds.name_at(e.args[0], e.fd_inode, e.fd_mode))
            .flatten();
        let futex = if e.kind == profiler_ebpf::kind::FUTEX_WAIT {
            let waker = if e.waker.tid != 0 {
                // The DWARF-unwound stack when there is one: it sees through libc.
                let unwound = self.stacks.take_native(e.waker.tid, e.waker.wake_ns);
                Some(FutexWaker {
                    tid: e.waker.tid,
                    wake_ns: e.waker.wake_ns,
                    user_stack: match unwound {
                        Some(id) => Some(id),
                        None => self.stack(e.waker.user_stack_id, false, e.waker.wake_ns)?,
                    },
                    kernel_stack: self.stack(e.waker.kernel_stack_id, true, e.waker.wake_ns)?,
                })
            } else {
                None
            };
            if let Some(w) = &waker {
                self.thread(w.tid)?;
            }
            Some(FutexWait {
                uaddr: e.args[0],
                op: e.args[1],
                timeout_ns: (e.timeout_ns != u64::MAX).then_some(e.timeout_ns),
                waker,
            })
        } else {
            None
        };
        let event = Syscall {
            tid: e.tid,
            nr: e.nr,
            name,
            args: e.args,
            start_ns: e.start_ns,
            end_ns: e.end_ns,
            ret: e.ret,
            user_stack: match self.stacks.take_native(e.tid, e.start_ns) {
                Some(id) => Some(id),
                // Taken as the call returned.
                None => self.stack(e.user_stack_id, false, e.end_ns)?,
            },
            fd,
            futex,
            unfinished: false,
        };
        self.write_syscall(event)
    }

    /// Writes a system call event, naming its thread the first time.
    fn write_syscall(&mut self, mut event: Syscall) -> Result<()> {
        // What the descriptor names is the target's to choose (a path of 4 KiB a call).
        if let Some(fd) = &mut event.fd {
            crate::budget::cut_name(fd);
        }
        self.thread(event.tid)?;
        self.writer.write_event(&Event::Syscall(event))?;
        self.events += 1;
        Ok(())
    }

    pub(super) fn java_block(&self, raw: &profiler_ebpf::JavaState) -> Option<JavaBlock> {
        use profiler_ebpf::java_flags;
        let jvm = self.jvm.as_ref()?;
        if raw.flags & java_flags::KNOWN == 0 {
            return None;
        }
        let nonzero = |v: u64| (v != 0).then_some(v);
        Some(JavaBlock {
            state: thread_state(&jvm.hotspot.states, raw.thread_state),
            vthread: (raw.flags & java_flags::MOUNTED != 0).then_some(raw.vthread_id),
            pending_monitor: nonzero(raw.pending_monitor),
            waiting_monitor: nonzero(raw.waiting_monitor),
            held_monitors: raw.held_monitors,
            pin_count: raw.pin_count,
            at_safepoint: raw.flags & java_flags::SAFEPOINT != 0,
            anchor: [raw.anchor_sp, raw.anchor_pc, raw.anchor_fp],
        })
    }

    pub(super) fn thread(&mut self, tid: u32) -> Result<()> {
        if self.recently_exited.contains(&tid) {
            return Ok(());
        }
        if self.known_threads.insert(tid) {
            let name = self
                .target
                .thread_name(tid)
                .unwrap_or_else(|| format!("tid-{tid}"));
            self.writer
                .write_event(&Event::Thread(ThreadName { tid, name }))?;
        }
        Ok(())
    }

    /// System calls still in progress when capture stops (a deadlock's waits among them, and
    /// calls under way since before attach) are recorded as unfinished, up to the window's
    /// end, `now`.
    pub(super) fn close_open_syscalls(&mut self, now: u64) -> Result<()> {
        for (tid, call) in self.capture.open_syscalls() {
            if call.flags & profiler_ebpf::syscall_flags::IDLE != 0
                || now.saturating_sub(call.start_ns) < self.min_syscall_ns
            {
                continue;
            }
            let futex_wait = call.flags & profiler_ebpf::syscall_flags::FUTEX_WAIT != 0;
            let timeout_ns = (call.timeout_ns != u64::MAX).then_some(call.timeout_ns);
            let call = UnfinishedCall {
                tid,
                nr: call.nr,
                args: call.args,
                start_ns: call.start_ns,
                futex_timeout_ns: futex_wait.then_some(timeout_ns),
            };
            self.write_unfinished_call(call, now)?;
        }
        Ok(())
    }

    /// Writes a system call still under way at `end_ns`, named with its file.
    fn write_unfinished_call(&mut self, call: UnfinishedCall, end_ns: u64) -> Result<()> {
        let name = syscall_name(call.nr);
        let fd = fdname::takes_fd(&name)
            .then(|| self.fds.name(call.args[0]))
            .flatten();
        let futex = call.futex_timeout_ns.map(|timeout_ns| FutexWait {
            uaddr: call.args[0],
            op: call.args[1],
            timeout_ns,
            waker: None,
        });
        let event = Syscall {
            tid: call.tid,
            nr: call.nr,
            name,
            args: call.args,
            start_ns: call.start_ns,
            end_ns,
            ret: 0,
            user_stack: None,
            fd,
            futex,
            unfinished: true,
        };
        self.write_syscall(event)
    }

    /// Intervals still open when capture stops (those since before attach among them) end
    /// at the window's end, `now`; their Java stacks are walked until `ended` says the time
    /// is up (the rest are counted lost).
    pub(super) fn close_open_intervals(
        &mut self,
        now: u64,
        ended: &dyn Fn() -> bool,
    ) -> Result<()> {
        let open = self.capture.open_intervals();
        for &(tid, ref start) in &open {
            let event = OffCpu {
                tid,
                start_ns: start.start_ns,
                end_ns: now,
                state: OffCpuState::from_prev_state(start.prev_state),
                kernel_stack: self.stack(start.kernel_stack_id, true, start.start_ns)?,
                user_stack: self.stack(start.user_stack_id, false, start.start_ns)?,
                waker_tid: None,
                cpu: 0,
                java: self.java_block(&start.java),
            };
            self.thread(tid)?;
            self.writer.write_event(&Event::OffCpu(event))?;
            self.events += 1;
        }
        // Java stacks of the threads still blocked, read now, a batch at a time (each copy is
        // 16 KiB: a target with thousands of threads blocked would make that much at once);
        // kept only for threads still in the same wait once the batch is read (one more look
        // at the map a batch, not one a thread).
        const BATCH: usize = 256;
        for (done, batch) in open.chunks(BATCH).enumerate() {
            if ended() {
                let left = open.len() - done * BATCH;
                self.capture.count_unhandled(left as u64);
                break;
            }
            let stacks: Vec<_> = batch
                .iter()
                .filter_map(|(tid, start)| {
                    let mut copy = self.open_java_stack(start)?;
                    copy.head.tid = *tid;
                    Some(((*tid, start.start_ns), copy))
                })
                .collect();
            if stacks.is_empty() {
                continue;
            }
            let still_open: HashSet<(u32, u64)> = self
                .capture
                .open_intervals()
                .iter()
                .map(|(tid, s)| (*tid, s.start_ns))
                .collect();
            for (key, copy) in stacks {
                if still_open.contains(&key) {
                    self.java_stack(&copy, None)?;
                }
            }
        }
        Ok(())
    }
}
