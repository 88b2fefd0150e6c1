//! Checking a whole configuration: values in range, addresses parsed, the sections
//! consistent with each other, and what an operator should hear about it.

use std::net::SocketAddr;

use crate::error::RouterError;

use super::*;

impl RouterConfig {
    /// What an operator should hear about these settings (logged at start): a listener
    /// beyond loopback allowed without a token, tokens sent in clear over plain TCP beyond
    /// loopback, an open metrics endpoint beyond loopback.
    pub fn warnings(&self, listen: &Listen) -> Vec<&'static str> {
        let exposed = |addr: Option<SocketAddr>| addr.is_some_and(|a| !a.ip().is_loopback());
        let mut out = Vec::new();
        if (exposed(listen.tcp) || exposed(listen.quic)) && !self.auth.has_token() {
            out.push("listening beyond loopback without a token (auth.allow_insecure): anyone who can reach the router may publish and observe every tag");
        }
        if exposed(listen.tcp) && !self.listen.tcp_tls && self.auth.has_token() {
            out.push("tokens cross plain TCP beyond loopback in clear: turn on listen.tcp_tls or use QUIC");
        }
        let metrics_token = !self.listen.metrics_token.is_empty()
            || !self.listen.metrics_token_file.as_os_str().is_empty();
        if exposed(listen.metrics) && !metrics_token {
            out.push("the metrics endpoint listens beyond loopback without listen.metrics_token");
        }
        out
    }

    /// Checks values and parses addresses.
    ///
    /// # Errors
    /// [`RouterError::Config`] naming the field; a TCP or QUIC listener beyond loopback
    /// without a token, unless `auth.allow_insecure`, names `auth.token`.
    pub fn validate(&self) -> Result<Listen, RouterError> {
        let addr = |field: &'static str, text: &str| -> Result<Option<SocketAddr>, RouterError> {
            if text.trim().is_empty() {
                return Ok(None);
            }
            text.trim()
                .parse()
                .map(Some)
                .map_err(|_| RouterError::Config {
                    field,
                    problem: "not an IP:port address",
                })
        };
        let bad = |field, problem| Err(RouterError::Config { field, problem });
        if self.queue.capacity == 0 {
            return bad("queue.capacity", "must be at least 1");
        }
        if self.queue.write_deadline_ms == 0 {
            return bad("queue.write_deadline_ms", "must be at least 1");
        }
        if self.limits.max_frame_len == 0 || self.limits.max_frame_len > i32::MAX as usize {
            return bad("limits.max_frame_len", "must be within 1..=2147483647");
        }
        if self.limits.max_connections == 0 {
            return bad("limits.max_connections", "must be at least 1");
        }
        if self.tls.cert.as_os_str().is_empty() != self.tls.key.as_os_str().is_empty() {
            return bad("tls.cert", "tls.cert and tls.key go together");
        }
        if self.auth.throttle_ms.is_some() {
            return bad(
                "auth.throttle_ms",
                "removed: addresses are no longer locked out; wrong credentials are slowed down (auth.tarpit_initial_ms, auth.tarpit_max_ms, auth.tarpit_max_in_flight)",
            );
        }
        if self.auth.tarpit_max_ms > 0 && self.auth.tarpit_max_in_flight == 0 {
            return bad("auth.tarpit_max_in_flight", "must be at least 1");
        }
        let listen = Listen {
            tcp: addr("listen.tcp", &self.listen.tcp)?,
            quic: addr("listen.quic", &self.listen.quic)?,
            metrics: addr("listen.metrics", &self.listen.metrics)?,
        };
        self.validate_mesh()?;
        self.validate_filters()?;
        self.federation.validate()?;
        if listen.tcp.is_some()
            && !self.listen.tcp_tls
            && !self.tls.client_ca.as_os_str().is_empty()
        {
            return bad(
                "tls.client_ca",
                "client certificates need TLS, and plain TCP would let clients in without one: with tls.client_ca, turn on listen.tcp_tls (--tcp-tls) or turn listen.tcp off (--tcp '')",
            );
        }
        if listen.tcp.is_none() && listen.quic.is_none() {
            return bad(
                "listen",
                "at least one of listen.tcp and listen.quic is needed",
            );
        }
        let exposed = [listen.tcp, listen.quic]
            .into_iter()
            .flatten()
            .any(|a| !a.ip().is_loopback());
        if exposed && !self.auth.has_token() && !self.auth.allow_insecure {
            return bad(
                "auth.token",
                "listening beyond loopback needs a token (auth.token_file, `y3 serve --token-file` or Y3_TOKEN) or auth.allow_insecure",
            );
        }
        Ok(listen)
    }

    fn validate_filters(&self) -> Result<(), RouterError> {
        let limits = self.filters.limits();
        if limits.max_paths == 0 || limits.max_paths > y3::filter::MAX_FILTER_PATHS {
            return Err(RouterError::Config {
                field: "filters.max_paths",
                problem: "must be within 1..=16",
            });
        }
        for attach in &self.filters.attach {
            if attach.function.trim().is_empty() {
                return Err(RouterError::Config {
                    field: "filters.attach.function",
                    problem: "must not be empty",
                });
            }
            if let Err(e) = y3::Filter::parse_with(&attach.filter, &limits, y3::Config::DEFAULT) {
                return Err(RouterError::Config {
                    field: "filters.attach.filter",
                    problem: e.kind(),
                });
            }
        }
        Ok(())
    }

    fn validate_mesh(&self) -> Result<(), RouterError> {
        let bad = |field, problem| Err(RouterError::Config { field, problem });
        if self.mesh.downstream.is_empty() {
            return Ok(());
        }
        if self.mesh.name.trim().is_empty() {
            return bad("mesh.name", "must not be empty with downstream zippers");
        }
        if self.mesh.name.len() > self.limits.max_name_len {
            return bad("mesh.name", "longer than limits.max_name_len");
        }
        let mut names = std::collections::HashSet::new();
        for downstream in &self.mesh.downstream {
            if downstream.name.trim().is_empty() {
                return bad("mesh.downstream.name", "must not be empty");
            }
            if !names.insert(downstream.name.as_str()) {
                return bad(
                    "mesh.downstream.name",
                    "two downstream zippers have this name",
                );
            }
            downstream.host_port()?;
        }
        Ok(())
    }
}

/// Parsed listener addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen {
    /// TCP, if on.
    pub tcp: Option<SocketAddr>,
    /// QUIC, if on.
    pub quic: Option<SocketAddr>,
    /// Metrics, if on.
    pub metrics: Option<SocketAddr>,
}
