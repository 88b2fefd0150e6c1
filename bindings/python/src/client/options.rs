//! `Options`: every field of `sdk::ClientOptions`, from Python keyword arguments.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use y3_transport::sdk::{Backoff, ClientOptions, Transport};
use y3_transport::tls::Trust;

use crate::errors::transport_error;

/// How to reach and identify to a router: `sdk::ClientOptions`, built once and shared by
/// the connections a client makes.
#[pyclass(frozen, module = "y3._y3")]
pub struct Options {
    pub(crate) inner: ClientOptions,
}

fn duration(seconds: f64, what: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(seconds).map_err(|_| {
        PyValueError::new_err(format!("{what} must be a non-negative number of seconds"))
    })
}

fn resolve(addr: &str) -> PyResult<SocketAddr> {
    if let Ok(a) = addr.parse() {
        return Ok(a);
    }
    addr.to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| {
            PyValueError::new_err(format!("cannot resolve {addr:?} (expected host:port)"))
        })
}

#[pymethods]
impl Options {
    #[new]
    #[pyo3(signature = (
        addr, *, transport = "tcp", name = "", token = None, credential = None, pin = None,
        ca = None, insecure = false, server_name = None, wanted_target = "",
        max_frame_len = None, handshake_timeout = 5.0, backoff_initial = 0.1,
        backoff_max = 5.0, backoff_attempts = None, send_queue = 1024, filters = Vec::new()
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        addr: &str,
        transport: &str,
        name: &str,
        token: Option<&str>,
        credential: Option<&str>,
        pin: Option<&str>,
        ca: Option<std::path::PathBuf>,
        insecure: bool,
        server_name: Option<String>,
        wanted_target: &str,
        max_frame_len: Option<usize>,
        handshake_timeout: f64,
        backoff_initial: f64,
        backoff_max: f64,
        backoff_attempts: Option<u32>,
        send_queue: usize,
        filters: Vec<(u32, String)>,
    ) -> PyResult<Options> {
        let transport = match transport {
            "tcp" => Transport::Tcp,
            "tls" | "tcp-tls" => Transport::TcpTls,
            "quic" => Transport::Quic,
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown transport {other:?} (expected \"tcp\", \"tls\" or \"quic\")"
                )))
            }
        };
        let chosen = usize::from(pin.is_some()) + usize::from(ca.is_some()) + usize::from(insecure);
        if chosen > 1 {
            return Err(PyValueError::new_err(
                "pin, ca and insecure exclude one another",
            ));
        }
        let trust = if let Some(pin) = pin {
            Trust::from_fingerprint(pin).map_err(|e| transport_error(py, e))?
        } else if let Some(ca) = ca {
            Trust::from_pem_file(Path::new(&ca)).map_err(|e| transport_error(py, e))?
        } else if insecure {
            Trust::Insecure
        } else {
            Trust::Unset
        };
        if token.is_some() && credential.is_some() {
            return Err(PyValueError::new_err(
                "token and credential exclude one another",
            ));
        }
        let mut inner = ClientOptions::new(resolve(addr)?)
            .transport(transport)
            .trust(trust)
            .name(name)
            .wanted_target(wanted_target)
            .backoff(Backoff {
                initial: duration(backoff_initial, "backoff initial")?,
                max: duration(backoff_max, "backoff max")?,
                // None: never give up (the SDK's default).
                attempts: backoff_attempts.map_or(Backoff::FOREVER, |n| n.max(1)),
            });
        for (tag, filter) in filters {
            inner = inner.filter(tag, filter);
        }
        if let Some(token) = token {
            inner = inner.token(token);
        }
        if let Some(credential) = credential {
            inner = inner.credential(credential);
        }
        if let Some(server_name) = server_name {
            inner.server_name = server_name;
        }
        if let Some(len) = max_frame_len {
            inner.max_frame_len = len;
        }
        inner.handshake_timeout = duration(handshake_timeout, "handshake_timeout")?;
        inner.send_queue = send_queue.max(1);
        Ok(Options { inner })
    }

    /// The router's address as resolved.
    #[getter]
    fn addr(&self) -> String {
        self.inner.addr.to_string()
    }

    /// `"tcp"`, `"tls"` or `"quic"`.
    #[getter]
    fn transport(&self) -> &'static str {
        match self.inner.transport {
            Transport::Tcp => "tcp",
            Transport::TcpTls => "tls",
            Transport::Quic => "quic",
        }
    }

    /// The client name.
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// Frames queued between the application and the connection.
    #[getter]
    fn send_queue(&self) -> usize {
        self.inner.send_queue
    }

    /// Whether a token would cross the network in clear (plain TCP beyond loopback).
    #[getter]
    fn exposes_credential(&self) -> bool {
        self.inner.exposes_credential()
    }

    fn __repr__(&self) -> String {
        // Never the credential.
        format!(
            "Options(addr={:?}, transport={:?}, name={:?})",
            self.addr(),
            self.transport(),
            self.inner.name
        )
    }
}
