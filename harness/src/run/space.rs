//! Room for a run's last words on a full disk (issue 56): the suites may fill the disk the build
//! directory is on, and the run must still write `junit_runner.xml`, `build-log.txt` and
//! `finished.json` saying so. The run sets [`RESERVED`] bytes aside in the build directory when it
//! starts (a file publishing skips, `.partial` as a writer's file at work) and frees them right
//! before it writes those; the Test step's watch ([`full`]) ends a run whose disk filled.

use std::io::Write;
use std::path::{Path, PathBuf};

/// What the run's own files at its end take, with room to spare (a build log is some kilobytes).
pub const RESERVED: u64 = 1024 * 1024;
/// A disk with less than this available to the run is full.
pub const FULL_BELOW: u64 = 256 * 1024;

const RESERVE_FILE: &str = ".space-reserve.partial";

/// Bytes set aside in a build directory until dropped (or [`Reserve::release`]d).
pub struct Reserve {
    path: Option<PathBuf>,
}

impl Reserve {
    /// Sets [`RESERVED`] bytes aside in `dir`, written out (not sparse: a sparse file reserves
    /// nothing). Fails when the disk has not that much room.
    pub fn set_aside(dir: &Path) -> std::io::Result<Reserve> {
        let path = dir.join(RESERVE_FILE);
        let written = (|| {
            let mut file = std::fs::File::create(&path)?;
            let block = vec![0u8; 64 * 1024];
            for _ in 0..RESERVED / block.len() as u64 {
                file.write_all(&block)?;
            }
            file.sync_all()
        })();
        match written {
            Ok(()) => Ok(Reserve { path: Some(path) }),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Frees the bytes for the run's last files.
    pub fn release(&mut self) {
        if let Some(path) = self.path.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        self.release();
    }
}

/// A reserve a killed run left in `dir`, removed.
pub fn remove_stale(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(RESERVE_FILE));
}

/// The disk `dir` is on, when it is full: its bytes available and its size.
pub fn full(dir: &Path) -> Option<(u64, u64)> {
    let stat = nix::sys::statvfs::statvfs(dir).ok()?;
    let block = stat.fragment_size() as u64;
    let (available, size) = (stat.blocks_available() as u64 * block, stat.blocks() as u64 * block);
    (available < FULL_BELOW).then_some((available, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_takes_its_bytes_until_released_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut reserve = Reserve::set_aside(dir.path()).unwrap();
        let file = dir.path().join(RESERVE_FILE);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), RESERVED);
        // Real blocks, not a sparse file.
        assert!(std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(&file).unwrap()) * 512 >= RESERVED);
        reserve.release();
        assert!(!file.exists());
        drop(Reserve::set_aside(dir.path()).unwrap());
        assert!(!file.exists(), "dropped, released");
        assert_eq!(full(dir.path()), None, "a temporary directory's disk is not full");
    }
}
