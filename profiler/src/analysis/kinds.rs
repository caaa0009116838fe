//! What a frame, a thread and a lock are, as views tell them apart. Each says itself with
//! `as_str`: the words of the JSON report, which must not change.

use std::fmt;

use crate::events::{Frame, FrameKind};

/// What a frame is, for views: kernel, native, JIT, or how a Java frame ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameClass {
    Kernel,
    Native,
    Jit,
    Interpreted,
    Compiled,
    Inlined,
    /// A Java method declared `native`.
    JavaNative,
    /// A stub of the JVM's (a Runtime1 stub on the way into a monitor).
    Stub,
    /// A call from the VM into Java.
    VmCall,
    /// A Java frame of unknown execution.
    Java,
}

impl FrameClass {
    /// From the frame's kind and, for a Java frame, how the walk saw it run (its `module`).
    pub fn of(frame: &Frame) -> Self {
        match frame.kind {
            FrameKind::Kernel => Self::Kernel,
            FrameKind::Native => Self::Native,
            FrameKind::Jit => Self::Jit,
            FrameKind::Java => match frame.module.as_deref() {
                Some("interpreted") => Self::Interpreted,
                Some("compiled") => Self::Compiled,
                Some("inlined") => Self::Inlined,
                Some("native") => Self::JavaNative,
                Some("stub") => Self::Stub,
                Some("vm") => Self::VmCall,
                _ => Self::Java,
            },
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kernel => "kernel",
            Self::Native => "native",
            Self::Jit => "jit",
            Self::Interpreted => "interpreted",
            Self::Compiled => "compiled",
            Self::Inlined => "inlined",
            Self::JavaNative => "java_native",
            Self::Stub => "stub",
            Self::VmCall => "vm_call",
            Self::Java => "java",
        }
    }

    /// Kernel or native code: how a thread waits, not where in the program.
    pub fn is_native(self) -> bool {
        matches!(self, Self::Kernel | Self::Native)
    }

    /// A Java method of the program's or the JDK's (not a stub or a call from the VM, which
    /// say how, not where).
    pub fn is_java_method(self) -> bool {
        matches!(
            self,
            Self::Interpreted | Self::Compiled | Self::Inlined | Self::JavaNative | Self::Java
        )
    }
}

// Stacks sort by their labels: by the words, as they did when kinds were strings.
impl Ord for FrameClass {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for FrameClass {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A thread's part in the JVM's scheduling of virtual threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ThreadRole {
    /// Runs virtual threads.
    Carrier,
    #[default]
    Other,
}

impl ThreadRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Carrier => "carrier",
            Self::Other => "other",
        }
    }
}

/// What a lock row waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockKind {
    /// A futex word of the target's.
    Futex,
    /// A lock inside the kernel the target's threads contended on.
    Kernel,
    /// A Java object virtual threads waited on unmounted, off their carriers (no OS thread
    /// blocked: `record --vthread-waits` saw them unmount and mount).
    Unmounted,
}

impl LockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Futex => "futex",
            Self::Kernel => "kernel",
            Self::Unmounted => "vthread",
        }
    }
}

impl serde::Serialize for FrameClass {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl serde::Serialize for ThreadRole {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl serde::Serialize for LockKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

// (`pad`, so that widths in format strings still apply.)
impl fmt::Display for FrameClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl fmt::Display for ThreadRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}
