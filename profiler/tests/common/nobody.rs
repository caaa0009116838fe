//! A JVM of an unprivileged user (nobody), for the tests that play its hostile owner against
//! root's pinprof: the JDK runtime and the workloads copied where nobody may read them (the
//! originals may sit under /root), a working directory of its own, and `setpriv` to run as it.

use std::{
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
    process::Command,
};

use super::{Jvm, java, require_root, workloads};

/// The JVM's user and group: nobody / nogroup.
pub const NOBODY: u32 = 65534;

/// A fresh directory of root's (mode 0755) under the temporary directory: `jdk/` (a copy of
/// the JDK runtime, so that its files can be replaced), `classes/` and `jvm-home/` (nobody's).
/// Removed when dropped.
pub struct Stage {
    dir: PathBuf,
}

impl Stage {
    pub fn new(tag: &str, major: u32) -> Self {
        require_root();
        let dir = std::env::temp_dir().join(format!("pinprof-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let stage = Self { dir };
        let java = java(major);
        let runtime = java.parent().and_then(Path::parent).unwrap();
        copy_tree(runtime, &stage.jdk());
        copy_tree(&workloads(), &stage.path("classes"));
        std::fs::create_dir(stage.home()).unwrap();
        std::os::unix::fs::chown(stage.home(), Some(NOBODY), Some(NOBODY)).unwrap();
        stage
    }

    /// A path inside the stage.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn jdk(&self) -> PathBuf {
        self.path("jdk")
    }

    /// The JVM's working directory, nobody's.
    pub fn home(&self) -> PathBuf {
        self.path("jvm-home")
    }

    /// `java` (the stage's, or another path to it) as nobody with the workloads on its class
    /// path, from its working directory: the JVM's flags, main class and arguments to add.
    pub fn java_as_nobody(&self, java: &Path) -> Command {
        let mut command = as_nobody();
        command
            .arg(java)
            .arg("-cp")
            .arg(self.path("classes"))
            .current_dir(self.home());
        command
    }

    /// `main` with `args` as nobody on the stage's JDK, with the JVM flags `flags`.
    pub fn start_jvm(&self, flags: &[&str], main: &str, args: &[&str]) -> Jvm {
        let mut command = self.java_as_nobody(&self.jdk().join("bin/java"));
        command.args(flags).arg(main).args(args);
        spawn_as_nobody(command)
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `setpriv` as nobody (its uid and gid, no supplementary groups), ready for a program.
pub fn as_nobody() -> Command {
    let mut command = Command::new("setpriv");
    command
        .arg(format!("--reuid={NOBODY}"))
        .arg(format!("--regid={NOBODY}"))
        .args(["--clear-groups", "--"]);
    command
}

/// Starts a JVM command made by `java_as_nobody` and checks it runs as nobody. An attach
/// socket another JVM of the same pid left behind (pids wrap) is not this one's: removed.
pub fn spawn_as_nobody(command: Command) -> Jvm {
    let jvm = Jvm::spawn(command).expect("the JVM started as nobody (setpriv, util-linux)");
    let owner = std::fs::metadata(format!("/proc/{}", jvm.pid))
        .unwrap()
        .uid();
    assert_eq!(owner, NOBODY, "the JVM runs as nobody");
    let stale = format!("/tmp/.java_pid{}", jvm.pid);
    if std::fs::symlink_metadata(&stale).is_ok_and(|m| m.uid() != NOBODY) {
        std::fs::remove_file(&stale).unwrap();
    }
    jvm
}

/// `cp -a`, then readable (and directories enterable) by everyone.
pub fn copy_tree(from: &Path, to: &Path) {
    let copied = Command::new("cp").arg("-a").arg(from).arg(to).status();
    assert!(copied.unwrap().success(), "cp -a {}", from.display());
    let opened = Command::new("chmod").arg("-R").arg("a+rX").arg(to).status();
    assert!(opened.unwrap().success(), "chmod -R a+rX {}", to.display());
}
