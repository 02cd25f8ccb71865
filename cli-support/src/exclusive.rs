//! Exclusive holds that harness processes honour among themselves: a run's artifacts directory, a
//! local cluster's name. A hold is an advisory `flock` on the directory itself or on a lock file,
//! so it ends with the process however that ends (SIGKILL included): nothing stale to clear. A
//! refused hold names the process that has it, from `/proc/locks`.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// An exclusive hold, released when dropped.
#[derive(Debug)]
pub struct Hold {
    _file: File,
    pub path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    /// Another process has it: `holder` describes it when `/proc/locks` names it.
    #[error("{} is held by {holder}", path.display())]
    Held { path: PathBuf, holder: String },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

/// Holds directory `dir` (which must exist), or says who holds it.
pub fn hold_dir(dir: &Path) -> Result<Hold, HoldError> {
    let file = File::open(dir).map_err(|source| HoldError::Io { path: dir.to_path_buf(), source })?;
    take(file, dir)
}

/// Holds the lock file `path` (created, with its directory, if missing), or says who holds it.
pub fn hold_file(path: &Path) -> Result<Hold, HoldError> {
    let io_err = |source| HoldError::Io { path: path.to_path_buf(), source };
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io_err)?;
    }
    let file = OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(io_err)?;
    take(file, path)
}

fn take(file: File, path: &Path) -> Result<Hold, HoldError> {
    match file.try_lock() {
        Ok(()) => Ok(Hold { _file: file, path: path.to_path_buf() }),
        Err(fs::TryLockError::WouldBlock) => {
            let holder = holder(&file).map_or_else(|| "another process".to_owned(), describe);
            Err(HoldError::Held { path: path.to_path_buf(), holder })
        }
        Err(fs::TryLockError::Error(source)) => Err(HoldError::Io { path: path.to_path_buf(), source }),
    }
}

/// The process holding an exclusive `flock` on `file`'s inode, as `/proc/locks` lists it.
fn holder(file: &File) -> Option<i32> {
    let meta = file.metadata().ok()?;
    let locks = fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| flock_holder(line, meta.dev(), meta.ino()))
}

/// The PID of a `/proc/locks` line for an exclusive flock on device `dev`, inode `ino`:
/// `1: FLOCK  ADVISORY  WRITE 4242 00:2a:1234 0 EOF` (device as hex major:minor).
fn flock_holder(line: &str, dev: u64, ino: u64) -> Option<i32> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [_, "FLOCK", _, "WRITE", pid, file, ..] = fields.as_slice() else { return None };
    let mut parts = file.split(':');
    let (major, minor, inode) = (parts.next()?, parts.next()?, parts.next()?);
    let same = u64::from_str_radix(major, 16).ok()? == major_of(dev)
        && u64::from_str_radix(minor, 16).ok()? == minor_of(dev)
        && inode.parse::<u64>().ok()? == ino;
    same.then(|| pid.parse().ok()).flatten()
}

/// glibc's `major()` and `minor()` of a `dev_t`.
fn major_of(dev: u64) -> u64 {
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff)
}

fn minor_of(dev: u64) -> u64 {
    ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff)
}

/// `pid 4242 (harness run --provider local …)`: its command line, shortened.
fn describe(pid: i32) -> String {
    const LONGEST: usize = 300;
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> =
        cmdline.split(|b| *b == 0).filter(|w| !w.is_empty()).map(|w| String::from_utf8_lossy(w).into_owned()).collect();
    let mut command = words.join(" ");
    if let Some(program) = words.first().and_then(|p| Path::new(p).file_name()) {
        command = command.replacen(&words[0], &program.to_string_lossy(), 1);
    }
    if command.chars().count() > LONGEST {
        command = command.chars().take(LONGEST).collect::<String>() + "…";
    }
    match command.is_empty() {
        true => format!("pid {pid}"),
        false => format!("pid {pid} ({command})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    #[test]
    fn a_hold_taken_by_another_process_is_refused_naming_it_and_free_once_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("locks/cluster.lock");
        let mut other = Command::new("flock")
            .args(["--exclusive", "--nonblock", "--close"])
            .arg(dir.path())
            .args(["sleep", "30"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let refused = loop {
            match hold_dir(dir.path()) {
                Err(e @ HoldError::Held { .. }) => break e,
                Ok(hold) => drop(hold),
                Err(e) => panic!("{e}"),
            }
            assert!(started.elapsed() < Duration::from_secs(10), "flock never took the directory");
            std::thread::sleep(Duration::from_millis(20));
        };
        let said = refused.to_string();
        assert!(
            said.contains(&format!("is held by pid {} (flock --exclusive --nonblock --close", other.id())),
            "{said}"
        );

        // A lock file is another inode: free.
        let file_hold = hold_file(&lock).unwrap();
        assert!(matches!(hold_file(&lock), Err(HoldError::Held { .. })), "a second hold in this process is refused");
        drop(file_hold);
        hold_file(&lock).expect("free once dropped");

        other.kill().unwrap();
        other.wait().unwrap();
        hold_dir(dir.path()).expect("free once its holder is gone");
    }

    #[test]
    fn of_many_threads_racing_for_one_hold_exactly_one_gets_it_each_round() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("race.lock");
        for _ in 0..50 {
            let barrier = std::sync::Barrier::new(4);
            let won: usize = std::thread::scope(|scope| {
                let racers: Vec<_> = (0..4)
                    .map(|_| {
                        scope.spawn(|| {
                            barrier.wait();
                            let hold = hold_file(&lock);
                            // Everyone tries while the winner still holds it.
                            barrier.wait();
                            hold.is_ok()
                        })
                    })
                    .collect();
                racers.into_iter().map(|r| r.join().unwrap() as usize).sum()
            });
            assert_eq!(won, 1);
        }
    }

    #[test]
    fn proc_locks_lines_name_the_holder_of_that_inode_only() {
        let dev = (0x2a << 8) | 0x3; // major 0x2a, minor 3
        assert_eq!(flock_holder("1: FLOCK  ADVISORY  WRITE 4242 2a:03:1234 0 EOF", dev, 1234), Some(4242));
        assert_eq!(flock_holder("1: FLOCK  ADVISORY  WRITE 4242 2a:03:1234 0 EOF", dev, 1235), None);
        assert_eq!(flock_holder("2: POSIX  ADVISORY  WRITE 4242 2a:03:1234 0 EOF", dev, 1234), None);
        assert_eq!(flock_holder("3: FLOCK  ADVISORY  READ 4242 2a:03:1234 0 EOF", dev, 1234), None);
        assert_eq!(flock_holder("4: FLOCK  ADVISORY  WRITE 4242 2a:04:1234 0 EOF", dev, 1234), None);
    }
}
