//! What a TCP peer has acknowledged (Linux): the bytes its kernel confirmed receiving,
//! read from the socket's `TCP_INFO` (`tcpi_bytes_acked`), against a mark taken right
//! after a flush. Once the mark is reached, the bytes are in the peer's kernel: a SIGKILL
//! of this process can no longer lose them (it throws away what is still in its own send
//! buffer, and resets the connection when it had unread input).
//!
//! ```text
//!  flushed by us ──▶ [ our send buffer: sent, unacked │ not sent ] ──▶ peer's kernel
//!                      └──────────── SIOCOUTQ bytes ─────────────┘      tcpi_bytes_acked
//!  mark (right after a flush, nothing written meanwhile) = SIOCOUTQ + tcpi_bytes_acked
//!  everything flushed up to the mark is acknowledged once tcpi_bytes_acked ≥ mark,
//!  or once SIOCOUTQ is 0 (nothing of ours is left unacknowledged)
//! ```
//!
//! The two numbers come from two system calls; the send buffer is read first, so an
//! acknowledgement arriving between them can only raise the mark (never report bytes as
//! acknowledged early); the "send buffer empty" rule then settles a mark a few bytes too
//! high once the peer has everything.
//!
//! The probe holds a duplicate of the socket's descriptor, taken by
//! [`TcpAcked::probe`] while the connection is open, and is meant to be dropped with the
//! connection's writer (the duplicate keeps the socket open while it lives). Elsewhere
//! than on Linux there is no such probe ([`TcpAcked::probe`] fails with `Unsupported`).

// The one unsafe code of this crate: `dup`, `getsockopt(TCP_INFO)` and `ioctl(SIOCOUTQ)`
// on a descriptor this module owns, each into a plain struct or integer of its own.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// The socket of a TCP connection, for reading what its peer acknowledged
/// ([`Connection::acked`](crate::Connection::acked)). Holds the raw descriptor only: valid
/// while the connection's reader or writer lives.
#[derive(Debug, Clone, Copy)]
pub struct TcpAcked {
    fd: RawFd,
}

/// A probe of one socket's acknowledged bytes (owns a duplicate of its descriptor).
#[derive(Debug)]
pub struct AckProbe {
    fd: OwnedFd,
}

impl TcpAcked {
    /// The socket of `stream`.
    pub(crate) fn of(stream: &impl AsRawFd) -> TcpAcked {
        TcpAcked {
            fd: stream.as_raw_fd(),
        }
    }

    /// A probe of the socket. Call only while the connection's reader or writer lives (the
    /// descriptor is theirs).
    ///
    /// # Errors
    /// `dup` failing (out of descriptors), or `Unsupported` off Linux.
    pub fn probe(&self) -> io::Result<AckProbe> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: `fcntl(F_DUPFD_CLOEXEC)` (a `dup`) reads no memory; a descriptor it returns is ours to own.
            let fd = unsafe { libc::fcntl(self.fd, libc::F_DUPFD_CLOEXEC, 0) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is a fresh descriptor owned by nobody else.
            let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
            Ok(AckProbe { fd })
        }
        #[cfg(not(target_os = "linux"))]
        {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "tcp acknowledgements are read on Linux only",
            ))
        }
    }
}

impl AckProbe {
    /// The mark of everything written so far: call right after a flush, with nothing
    /// written meanwhile. Everything flushed is acknowledged once [`AckProbe::reached`].
    ///
    /// # Errors
    /// The system call's (the socket closed, say).
    pub fn mark(&self) -> io::Result<u64> {
        // Send buffer first: an acknowledgement between the two raises the mark only.
        let queued = self.unacked()?;
        Ok(self.bytes_acked()? + queued)
    }

    /// Whether everything up to `mark` is acknowledged: the peer acknowledged that many
    /// bytes, or nothing written is left unacknowledged.
    ///
    /// # Errors
    /// The system call's (the socket closed, say).
    pub fn reached(&self, mark: u64) -> io::Result<bool> {
        if self.bytes_acked()? >= mark {
            return Ok(true);
        }
        Ok(self.unacked()? == 0)
    }

    /// `tcpi_bytes_acked`: bytes of ours the peer acknowledged (since the connection began).
    #[cfg(target_os = "linux")]
    fn bytes_acked(&self) -> io::Result<u64> {
        let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        // SAFETY: `info` is a writable `tcp_info` of `len` bytes; the kernel writes at most
        // `len` bytes and the struct is plain integers (zeroed first).
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                info.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // An old kernel (before 4.1) writes less than the field: no such number.
        let end = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + 8;
        if (len as usize) < end {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the kernel's tcp_info has no tcpi_bytes_acked",
            ));
        }
        // SAFETY: zeroed, then written by the kernel; every bit pattern is valid.
        Ok(unsafe { info.assume_init() }.tcpi_bytes_acked)
    }

    /// `SIOCOUTQ`: bytes in the send buffer, sent or not, not yet acknowledged.
    #[cfg(target_os = "linux")]
    fn unacked(&self) -> io::Result<u64> {
        let mut n: libc::c_int = 0;
        // SAFETY: `SIOCOUTQ` (= `TIOCOUTQ`) writes one `int` through the pointer.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n.max(0) as u64)
    }

    #[cfg(not(target_os = "linux"))]
    fn bytes_acked(&self) -> io::Result<u64> {
        Err(io::ErrorKind::Unsupported.into())
    }

    #[cfg(not(target_os = "linux"))]
    fn unacked(&self) -> io::Result<u64> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn bytes_are_acknowledged_once_the_peer_kernel_has_them() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let probe = TcpAcked::of(&server).probe().unwrap();
        let start = probe.mark().unwrap();
        server.write_all(&[7u8; 100_000]).unwrap();
        let mark = probe.mark().unwrap();
        assert!(mark >= start + 100_000, "{start} {mark}");
        // The peer's kernel takes it (loopback: at once, within its receive buffer).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !probe.reached(mark).unwrap() {
            assert!(std::time::Instant::now() < deadline, "never acknowledged");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut got = vec![0u8; 100_000];
        client.read_exact(&mut got).unwrap();
        // A mark past what was written is not reached while bytes are unacknowledged;
        // with the peer's window shut (it does not read), 64 MiB can never all be.
        let big = vec![1u8; 1 << 20];
        server.set_nonblocking(true).unwrap();
        let mut written = 0usize;
        while written < 64 << 20 {
            match server.write(&big) {
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        let stuck = probe.mark().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !probe.reached(stuck).unwrap(),
            "a full window is not acknowledged"
        );
    }
}
