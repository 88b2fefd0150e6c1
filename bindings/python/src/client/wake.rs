//! Wake-ups the asyncio loop watches itself: the Rust side writes a byte to one end of a
//! socket pair, the loop (`loop.add_reader` on the other end's descriptor) wakes in its own
//! thread. Cheaper than completing an asyncio future from a tokio thread, which hands the
//! result to a blocking thread that must take the interpreter to call
//! `call_soon_threadsafe`.

#[cfg(unix)]
pub use unix_wake::{wake_pair, WakeEnd, WatchedEnd};

/// The wake-up pair: a Unix socket pair, both ends non-blocking.
#[cfg(unix)]
mod unix_wake {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    use pyo3::PyResult;

    pub struct WakeEnd(UnixStream);
    pub struct WatchedEnd(UnixStream);

    pub fn wake_pair() -> std::io::Result<(WakeEnd, WatchedEnd)> {
        let (a, b) = UnixStream::pair()?;
        a.set_nonblocking(true)?;
        b.set_nonblocking(true)?;
        Ok((WakeEnd(a), WatchedEnd(b)))
    }

    impl WakeEnd {
        pub fn wake(&self) {
            // A full socket buffer means a wake-up is already pending: nothing is lost.
            let _ = (&self.0).write(&[1]);
        }
    }

    impl WatchedEnd {
        pub fn fileno(&self) -> PyResult<i32> {
            Ok(self.0.as_raw_fd())
        }

        pub fn drain(&self) {
            let mut buf = [0u8; 256];
            while let Ok(n) = (&self.0).read(&mut buf) {
                if n < buf.len() {
                    break;
                }
            }
        }
    }
}

#[cfg(not(unix))]
pub use other_wake::{wake_pair, WakeEnd, WatchedEnd};

/// Elsewhere no descriptor: `fileno` raises `NotImplementedError` and Python awaits
/// `wait_ready` instead.
#[cfg(not(unix))]
mod other_wake {
    use pyo3::exceptions::PyNotImplementedError;
    use pyo3::PyResult;

    pub struct WakeEnd;
    pub struct WatchedEnd;

    pub fn wake_pair() -> std::io::Result<(WakeEnd, WatchedEnd)> {
        Ok((WakeEnd, WatchedEnd))
    }

    impl WakeEnd {
        pub fn wake(&self) {}
    }

    impl WatchedEnd {
        pub fn fileno(&self) -> PyResult<i32> {
            Err(PyNotImplementedError::new_err(
                "no descriptor to watch on this platform",
            ))
        }

        pub fn drain(&self) {}
    }
}
