//! The one way the Rust tests, the soak and the lab start `y3 serve` and learn where it
//! listens: a [`ServeDir`] gives the router a private directory, adds
//! `--ready-file DIR/ready.json` to its command line, and [`ServeDir::wait`] waits (bounded)
//! for that file, the JSON document [`Ready`] (`docs/operations.md`, "The ready file"),
//! instead of parsing the human-readable startup lines.
//!
//! The directory is also the router's `XDG_RUNTIME_DIR` and `XDG_STATE_HOME`, so its dev
//! certificate (`DIR/y3/dev-cert*.pem`) and state (`DIR/y3/quic-reset.secret`, ...) stay
//! out of the user's `~/.cache/y3` and `~/.local/state/y3`; a [`ServeDir::new`] directory is
//! removed on drop. A harness that sets either variable itself (after
//! [`ServeDir::command`]) wins.
//!
//! ```no_run
//! use std::process::Command;
//! let dir = y3_testkit::ServeDir::new("example").unwrap();
//! let mut cmd = Command::new("y3");
//! cmd.args(["serve", "--tcp", "127.0.0.1:0", "--quic", "127.0.0.1:0"]);
//! let mut child = dir.command(&mut cmd).spawn().unwrap();
//! let ready = dir.wait(&mut child, y3_testkit::READY_WAIT).unwrap();
//! println!("tcp {}", ready.listener("tcp").unwrap());
//! ```

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use y3_router::ready::{Ready, ReadyCertificate, READY_SCHEMA};

/// How long a harness waits for a router's ready file by default: generous, for a loaded
/// machine (a router is ready in milliseconds when idle).
pub const READY_WAIT: Duration = Duration::from_secs(30);

/// The ready file's name inside a [`ServeDir`].
pub const READY_FILE: &str = "ready.json";

/// A router that did not become ready.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The process ended before it wrote its ready file (a bind or config error: its
    /// stderr says which).
    #[error("y3 serve exited before it was ready ({status})")]
    Exited {
        /// How it ended.
        status: ExitStatus,
    },
    /// No ready file within the wait.
    #[error("y3 serve wrote no ready file within {waited:?}")]
    Timeout {
        /// How long it was waited for.
        waited: Duration,
    },
    /// The ready file, or the process's state, could not be read.
    #[error("the ready file {path}: {source}")]
    Io {
        /// The ready file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl StartError {
    /// The stable snake_case kind.
    pub fn kind(&self) -> &'static str {
        match self {
            StartError::Exited { .. } => "exited",
            StartError::Timeout { .. } => "timeout",
            StartError::Io { .. } => "io",
        }
    }
}

/// One router's private directory: its ready file, dev certificate and state.
#[derive(Debug)]
pub struct ServeDir {
    path: PathBuf,
    remove: bool,
}

impl ServeDir {
    /// A fresh directory (mode 0700) under the system's temporary directory, named after
    /// `name`, this process and a counter; removed on drop.
    ///
    /// # Errors
    /// The file system's.
    pub fn new(name: &str) -> io::Result<ServeDir> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("y3-serve-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        private_dir(&path)?;
        Ok(ServeDir { path, remove: true })
    }

    /// `path` (created 0700 when missing) as the directory, kept after drop: a run's
    /// output directory whose files are looked at afterwards (the soak's, the lab's).
    ///
    /// # Errors
    /// The file system's.
    pub fn keep(path: impl Into<PathBuf>) -> io::Result<ServeDir> {
        let path = path.into();
        private_dir(&path)?;
        Ok(ServeDir {
            path,
            remove: false,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the router writes its ready file.
    pub fn ready_path(&self) -> PathBuf {
        self.path.join(READY_FILE)
    }

    /// Removes a ready file left here by an earlier router, and returns the arguments
    /// that make the next one write its own: `--ready-file DIR/ready.json`.
    pub fn prepare(&self) -> [OsString; 2] {
        let _ = std::fs::remove_file(self.ready_path());
        ["--ready-file".into(), self.ready_path().into_os_string()]
    }

    /// The environment that keeps the router's dev certificate and state here:
    /// `XDG_RUNTIME_DIR` and `XDG_STATE_HOME`, both the directory.
    pub fn env(&self) -> [(&'static str, &Path); 2] {
        [
            ("XDG_RUNTIME_DIR", &self.path),
            ("XDG_STATE_HOME", &self.path),
        ]
    }

    /// Readies `cmd`, a `y3 serve` command with its subcommand already given:
    /// [`prepare`](Self::prepare)'s arguments and [`env`](Self::env).
    pub fn command<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.args(self.prepare()).envs(self.env())
    }

    /// Waits at most `within` until `child` (started from [`command`](Self::command))
    /// has written its ready file; the document.
    ///
    /// # Errors
    /// [`StartError::Exited`] when the process ends first, [`StartError::Timeout`], or
    /// [`StartError::Io`] for a file that does not read as a [`Ready`]. The child is left
    /// as it is: the caller kills it (or reads its output).
    pub fn wait(&self, child: &mut Child, within: Duration) -> Result<Ready, StartError> {
        let pid = child.id();
        self.wait_pid(pid, within, || child.try_wait())
    }

    /// As [`wait`](Self::wait), for a process known by its id and a way to ask whether it
    /// has ended (a harness's own process wrapper).
    ///
    /// # Errors
    /// As [`wait`](Self::wait).
    pub fn wait_pid(
        &self,
        pid: u32,
        within: Duration,
        mut exited: impl FnMut() -> io::Result<Option<ExitStatus>>,
    ) -> Result<Ready, StartError> {
        let path = self.ready_path();
        let io = |source| StartError::Io {
            path: path.clone(),
            source,
        };
        let start = Instant::now();
        loop {
            match Ready::read(&path) {
                // Written by this process (not one before it on the same directory).
                Ok(ready) if ready.pid == pid => return Ok(ready),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(e)),
            }
            if let Some(status) = exited().map_err(io)? {
                return Err(StartError::Exited { status });
            }
            if start.elapsed() > within {
                return Err(StartError::Timeout { waited: within });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for ServeDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Creates `path` (and its parents) with mode 0700 on Unix: the dev certificate's
/// directory check refuses one that others can write to.
fn private_dir(path: &Path) -> io::Result<()> {
    std::fs::create_dir_all(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(pid: u32) -> Ready {
        Ready {
            schema: READY_SCHEMA,
            pid,
            version: "0.1.0".into(),
            listeners: [("tcp".to_owned(), "127.0.0.1:1".parse().unwrap())].into(),
            tcp_tls: false,
            certificate: ReadyCertificate {
                sha256: "00".repeat(32),
                self_signed: true,
                path: None,
            },
            config: None,
        }
    }

    /// A stale file is removed by `prepare`; a document of another process is not taken;
    /// this process's is; the directory goes on drop.
    #[test]
    fn wait_takes_only_its_process_document() {
        let dir = ServeDir::new("unit").unwrap();
        document(1).write_atomic(&dir.ready_path()).unwrap();
        let args = dir.prepare();
        assert_eq!(args[1], dir.ready_path().into_os_string());
        assert!(!dir.ready_path().exists());
        let env = dir.env();
        assert_eq!(env[0], ("XDG_RUNTIME_DIR", dir.path()));
        document(1).write_atomic(&dir.ready_path()).unwrap();
        let short = Duration::from_millis(50);
        let err = dir.wait_pid(2, short, || Ok(None)).unwrap_err();
        assert_eq!(err.kind(), "timeout");
        document(2).write_atomic(&dir.ready_path()).unwrap();
        let ready = dir.wait_pid(2, short, || Ok(None)).unwrap();
        assert_eq!(ready.listener("tcp"), Some("127.0.0.1:1".parse().unwrap()));
        let path = dir.path().to_owned();
        drop(dir);
        assert!(!path.exists());
    }

    /// A process that ends before it is ready is `exited`, with its status.
    #[cfg(unix)]
    #[test]
    fn a_process_that_ends_first_is_exited() {
        let dir = ServeDir::new("unit-exit").unwrap();
        let mut child = Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
        let err = dir.wait(&mut child, READY_WAIT).unwrap_err();
        assert_eq!(err.kind(), "exited");
        assert!(matches!(err, StartError::Exited { status } if status.code() == Some(3)));
    }
}
