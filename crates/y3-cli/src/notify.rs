//! systemd's readiness protocol (`sd_notify(3)`): with `NOTIFY_SOCKET` set (a unit of
//! `Type=notify`), `y3 serve` says `READY=1` once it listens, `RELOADING=1` then `READY=1`
//! around a reload, and `STOPPING=1` when it starts draining. One datagram each:
//!
//! ```text
//!  NOTIFY_SOCKET=/run/systemd/notify   a path, or @name for an abstract socket (Linux)
//!  datagram: "RELOADING=1"            newline-separated KEY=VALUE lines
//! ```
//!
//! Without `NOTIFY_SOCKET` every call does nothing. A failed send is logged, never fatal.

/// The state to announce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Listening (after start, and after a reload).
    Ready,
    /// Reloading the configuration (`Type=notify` with `ExecReload=kill -HUP $MAINPID`;
    /// `Type=notify-reload` would also want `MONOTONIC_USEC`, which is not sent).
    Reloading,
    /// Draining before exit.
    Stopping,
}

impl State {
    fn message(self) -> String {
        match self {
            State::Ready => "READY=1".to_owned(),
            State::Reloading => "RELOADING=1".to_owned(),
            State::Stopping => "STOPPING=1".to_owned(),
        }
    }
}

/// Sends `state` to `NOTIFY_SOCKET`, if set.
pub fn notify(state: State) {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send(&socket, state.message().as_bytes()) {
        tracing::warn!(error = %e, socket = ?socket, "cannot notify systemd");
    }
}

#[cfg(unix)]
fn send(socket: &std::ffi::OsStr, message: &[u8]) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::net::UnixDatagram;
    let sock = UnixDatagram::unbound()?;
    let bytes = socket.as_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        #[cfg(target_os = "linux")]
        {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.send_to_addr(message, &addr)?;
            return Ok(());
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = name;
            return Err(std::io::Error::other("abstract sockets need Linux"));
        }
    }
    sock.send_to(message, std::path::Path::new(socket))?;
    Ok(())
}

#[cfg(not(unix))]
fn send(_socket: &std::ffi::OsStr, _message: &[u8]) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn datagrams_reach_the_socket() {
        let path = std::env::temp_dir().join(format!("y3-notify-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let server = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str(), State::Ready.message().as_bytes()).unwrap();
        let mut buf = [0u8; 128];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        send(path.as_os_str(), State::Reloading.message().as_bytes()).unwrap();
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"RELOADING=1");
        let _ = std::fs::remove_file(&path);
    }
}
