use std::os::unix::fs::{PermissionsExt as _, symlink};

use super::*;

/// A scratch directory of this test's own, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        Self(private_temp_dir(&format!("pinprof-safefs-{tag}")).unwrap())
    }

    /// A file standing for one that must never be touched (think /etc/shadow).
    fn precious(&self) -> PathBuf {
        let path = self.0.join("precious");
        std::fs::write(&path, b"root:secret\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn assert_untouched(path: &Path) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), b"root:secret\n");
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    assert_eq!(meta.uid(), unsafe { libc::geteuid() });
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn outputs_are_new_0600_files() {
    let s = Scratch::new("new");
    let path = s.0.join("out.pinrec");
    let out = create_output(&path, Existing::Refuse).unwrap();
    out.file().write_all(b"data").unwrap();
    assert!(!path.exists(), "at its name only once committed");
    out.commit().unwrap();
    assert_eq!(mode(&path), 0o600);
    // A name taken between the start and the commit is not overwritten either.
    let late = s.0.join("late.pinrec");
    let out = create_output(&late, Existing::Refuse).unwrap();
    std::fs::write(&late, b"theirs").unwrap();
    let err = out.commit().unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err:#}");
    assert_eq!(std::fs::read(&late).unwrap(), b"theirs");
    std::fs::remove_file(&late).unwrap();
    // An existing file is neither truncated nor replaced without being asked.
    let err = create_output(&path, Existing::Refuse).err().unwrap();
    assert!(err.to_string().contains("already exists"), "{err:#}");
    assert_eq!(std::fs::read(&path).unwrap(), b"data");
    // Asked, it is replaced by a new file, once that is committed.
    let out = create_output(&path, Existing::Replace).unwrap();
    out.file().write_all(b"new").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"data");
    out.commit().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    assert_eq!(mode(&path), 0o600);
    // Dropped before its commit, a new output leaves nothing behind.
    let other = s.0.join("other.pinrec");
    drop(create_output(&other, Existing::Refuse).unwrap());
    assert!(!other.exists());
    drop(create_output(&path, Existing::Replace).unwrap());
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    assert_eq!(std::fs::read_dir(&s.0).unwrap().count(), 1);
}

#[test]
fn a_symlink_at_the_output_is_never_followed() {
    let s = Scratch::new("link");
    let precious = s.precious();
    let path = s.0.join("out.pinrec");
    symlink(&precious, &path).unwrap();
    for existing in [Existing::Refuse, Existing::Replace] {
        let err = create_output(&path, existing).err().unwrap();
        assert!(err.to_string().contains("is a symbolic link"), "{err:#}");
    }
    assert!(std::fs::symlink_metadata(&path).unwrap().is_symlink());
    assert_untouched(&precious);
    // Nor is anything but a regular file replaced: a device, a directory.
    for (other, what) in [("/dev/null", "is a device"), ("/tmp", "is a directory")] {
        let err = create_output(Path::new(other), Existing::Replace)
            .err()
            .unwrap();
        assert!(err.to_string().contains(what), "{err:#}");
        let err = write_output(Path::new(other), Existing::Replace, |_| Ok(())).unwrap_err();
        assert!(err.to_string().contains(what), "{err:#}");
    }
    // A dangling link (to a file that does not exist yet) creates nothing there either.
    let dangling = s.0.join("dangling.pinrec");
    let victim = s.0.join("victim");
    symlink(&victim, &dangling).unwrap();
    assert!(create_output(&dangling, Existing::Refuse).is_err());
    assert!(!victim.exists());
}

#[test]
fn outputs_written_at_once_go_through_a_temporary_file() {
    let s = Scratch::new("atomic");
    let precious = s.precious();
    let path = s.0.join("graph.svg");
    // Links planted at the output and at the first temporary name.
    // A link at the output is refused (not followed, not replaced); one at the temporary
    // name is passed by.
    symlink(&precious, &path).unwrap();
    symlink(&precious, s.0.join(".graph.svg.pinprof.tmp")).unwrap();
    let err = write_output(
        &path,
        Existing::Replace,
        |out| Ok(out.write_all(b"<svg/>")?),
    )
    .unwrap_err();
    assert!(err.to_string().contains("is a symbolic link"), "{err:#}");
    std::fs::remove_file(&path).unwrap();
    write_output(&path, Existing::Refuse, |out| Ok(out.write_all(b"<svg/>")?)).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"<svg/>");
    assert_eq!(mode(&path), 0o600);
    assert_untouched(&precious);
    // A regular file there is refused unless replacing, as a recording is.
    let err = write_output(&path, Existing::Refuse, |out| {
        Ok(out.write_all(b"<svg>2</svg>")?)
    })
    .unwrap_err();
    assert!(err.to_string().contains("--force"), "{err:#}");
    assert_eq!(std::fs::read(&path).unwrap(), b"<svg/>");
    write_output(&path, Existing::Replace, |out| {
        Ok(out.write_all(b"<svg>2</svg>")?)
    })
    .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"<svg>2</svg>");
    // A writer that fails leaves no temporary file and the old output as it was.
    let err = write_output(&path, Existing::Replace, |_| bail!("disk on fire")).unwrap_err();
    assert!(err.to_string().contains("disk on fire"));
    assert_eq!(std::fs::read(&path).unwrap(), b"<svg>2</svg>");
    let names: Vec<_> = std::fs::read_dir(&s.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names.len(),
        3,
        "output, precious, planted link only: {names:?}"
    );
}

#[test]
fn a_symlinked_directory_is_refused() {
    let s = Scratch::new("dirlink");
    let real = s.0.join("real");
    std::fs::create_dir(&real).unwrap();
    symlink(&real, s.0.join("link")).unwrap();
    let err = create_output(&s.0.join("link/out.pinrec"), Existing::Refuse)
        .err()
        .unwrap();
    assert!(format!("{err:#}").contains("symbolic link"), "{err:#}");
    assert!(std::fs::read_dir(&real).unwrap().next().is_none());
}

#[test]
fn a_created_file_is_removed_only_while_it_is_ours() {
    let s = Scratch::new("guard");
    let dir = Dir::open(&s.0).unwrap();
    let created = dir.create_new(OsStr::new("trigger")).unwrap();
    assert_eq!(mode(&s.0.join("trigger")), 0o600);
    drop(created);
    assert!(!s.0.join("trigger").exists());
    // Someone swaps the name for another file: dropping the guard leaves theirs alone.
    let created = dir.create_new(OsStr::new("trigger")).unwrap();
    std::fs::remove_file(s.0.join("trigger")).unwrap();
    std::fs::write(s.0.join("trigger"), b"theirs").unwrap();
    drop(created);
    assert_eq!(std::fs::read(s.0.join("trigger")).unwrap(), b"theirs");
    // A name that is not a plain file name is refused.
    assert!(dir.create_new(OsStr::new("../escape")).is_err());
}

#[test]
fn files_the_target_names_must_be_regular_and_small() {
    let s = Scratch::new("read");
    let root = TargetRoot::own().unwrap();
    let expect = Expect {
        max_bytes: 1 << 20,
        owner: Owner::Anyone,
    };
    // A device and a FIFO are refused at once (opening the FIFO does not wait for a writer).
    let err = read_target_file(&root, Path::new("/dev/zero"), expect).unwrap_err();
    assert!(
        format!("{err:#}").contains("a device, not a regular file"),
        "{err:#}"
    );
    let fifo = s.0.join("fifo");
    let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let started = std::time::Instant::now();
    assert!(read_target_file(&root, &fifo, expect).is_err());
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // A file over the cap, and a file of another owner when the owner matters.
    let big = s.0.join("big");
    std::fs::write(&big, vec![b'x'; 2048]).unwrap();
    let small = Expect {
        max_bytes: 1024,
        owner: Owner::Anyone,
    };
    assert!(read_target_file(&root, &big, small).is_err());
    let stranger = Expect {
        max_bytes: 1 << 20,
        owner: Owner::Is(unsafe { libc::geteuid() } + 1),
    };
    assert!(read_target_file(&root, &big, stranger).is_err());
    assert_eq!(read_target_file(&root, &big, expect).unwrap().len(), 2048);
    // A symlink at the last component is not followed.
    let link = s.0.join("link");
    symlink(&big, &link).unwrap();
    assert!(read_target_file(&root, &link, expect).is_err());
}

/// The kernel's pseudo files pass as regular files (`/proc/kmsg` bind-mounted where the target
/// names a file would drain the kernel's log when read): a file the target or the user names
/// is read only from an ordinary filesystem; a kernel file pinprof chose, only from the kernel's.
#[test]
fn pseudo_files_of_the_kernel_are_read_only_where_pinprof_chose_them() {
    let root = TargetRoot::own().unwrap();
    for path in [
        "/proc/version",
        "/sys/kernel/mm/transparent_hugepage/enabled",
    ] {
        let path = Path::new(path);
        if !path.exists() {
            continue;
        }
        let err = root.open_file(path).unwrap_err();
        assert!(
            err.to_string().contains("filesystem: not read"),
            "{path:?}: {err}"
        );
        let err = open_user_file(path).unwrap_err();
        assert!(
            err.to_string().contains("filesystem: not read"),
            "{path:?}: {err}"
        );
        assert!(root.open_file_on(path, Fs::Kernel).is_ok(), "{path:?}");
    }
    // And an ordinary file is not a kernel file.
    let s = Scratch::new("pseudo");
    let file = s.0.join("plain");
    std::fs::write(&file, b"x").unwrap();
    assert!(root.open_file_on(&file, Fs::Kernel).is_err());
    assert_eq!(
        read_capped(&open_user_file(&file).unwrap(), &file, 10).unwrap(),
        b"x"
    );
}

/// What is opened for reading is the inode checked, opened without making a terminal the
/// process's controlling one, and never a device: `/dev/tty`-like nodes included.
#[test]
fn only_regular_files_are_opened_for_reading() {
    for path in ["/dev/null", "/dev/ptmx", "/dev/zero"] {
        let err = open_user_file(Path::new(path)).unwrap_err();
        assert!(err.to_string().contains("a device"), "{path}: {err}");
    }
    let err = open_user_file(Path::new("/tmp")).unwrap_err();
    assert!(err.to_string().contains("a directory"), "{err}");
}

/// A process in a root of its own (as in a container): its absolute symlinks resolve inside
/// that root, never on the host.
#[test]
fn paths_resolve_inside_the_targets_root() {
    let s = Scratch::new("chroot");
    let root_dir = s.0.join("root");
    std::fs::create_dir_all(root_dir.join("jdk")).unwrap();
    std::fs::write(root_dir.join("jdk/release"), b"JAVA_VERSION=\"21\"\n").unwrap();
    // An absolute link meant to lead out to the host's file.
    let host_secret = s.precious();
    symlink(&s.0, root_dir.join("escape")).unwrap();
    let c = CString::new(root_dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: the child only calls chroot and pause (async-signal-safe) until it is killed.
    let child = unsafe { libc::fork() };
    if child == 0 {
        unsafe {
            if libc::chroot(c.as_ptr()) != 0 {
                libc::_exit(1);
            }
            loop {
                libc::pause();
            }
        }
    }
    assert!(child > 0);
    let kill = scopeguard(child);
    // Wait until the child is in its root.
    let mut ready = false;
    for _ in 0..200 {
        if std::fs::read_link(format!("/proc/{child}/root"))
            .ok()
            .as_deref()
            == Some(&root_dir)
        {
            ready = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(ready, "the child did not chroot");
    let root = TargetRoot::open(&crate::process::Process::attach(child as u32).unwrap()).unwrap();
    let expect = Expect {
        max_bytes: 1 << 20,
        owner: Owner::Anyone,
    };
    let release = read_target_file(&root, Path::new("/jdk/release"), expect).unwrap();
    assert_eq!(release, b"JAVA_VERSION=\"21\"\n");
    // /escape -> <scratch> is followed inside the root, where <scratch>/precious is nothing.
    let through = root_dir.join("escape").join("precious");
    let inside = Path::new("/escape").join(host_secret.strip_prefix(&s.0).unwrap());
    assert!(
        read_target_file(&root, &inside, expect).is_err(),
        "{through:?} read from the host"
    );
    // ..: cannot climb out of the root either.
    let climb = Path::new("/../../../../").join(host_secret.strip_prefix("/").unwrap());
    assert!(read_target_file(&root, &climb, expect).is_err());
    assert_untouched(&host_secret);
    drop(kill);
}

/// Kills and reaps a forked child when dropped.
fn scopeguard(pid: libc::pid_t) -> impl Drop {
    struct Kill(libc::pid_t);
    impl Drop for Kill {
        fn drop(&mut self) {
            unsafe {
                libc::kill(self.0, libc::SIGKILL);
                libc::waitpid(self.0, std::ptr::null_mut(), 0);
            }
        }
    }
    Kill(pid)
}
