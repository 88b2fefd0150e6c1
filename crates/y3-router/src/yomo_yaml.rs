//! YoMo's zipper configuration (the YAML of `yomo serve -c zipper.yaml`, YoMo v1.22.0's
//! `pkg/config`), read into a [`RouterConfig`], so that a YoMo deployment moves to
//! `y3 serve -c zipper.yaml` with the file it has (`docs/migrating-from-yomo.md`).
//!
//! ```yaml
//! name: zipper-1            # -> mesh.name (the name this router dials downstreams with)
//! host: 0.0.0.0             # -> listen.quic = "0.0.0.0:9001" (QUIC only, as YoMo;
//! port: 9001                #    listen.tcp and listen.metrics are off)
//! auth:
//!   type: token             # the only type YoMo has
//!   token: z1               # -> auth.token
//! mesh:                     # -> [[mesh.downstream]], in the file's order
//!   zipper-1:               # this router's own name: skipped, as YoMo skips it
//!     host: 127.0.0.1
//!     port: 9001
//!     credential: "token:z1"
//!   zipper-2:               # -> name = "zipper-2", addr = "127.0.0.1:9002",
//!     host: 127.0.0.1       #    credential = "token:z2", transport = "quic"
//!     port: 9002
//!     credential: "token:z2"
//! ```
//!
//! A file is YoMo's YAML when its name ends in `.yaml` or `.yml` ([`is_yaml_path`]): the
//! rule YoMo itself applies (`ErrConfigExt`), and one that cannot mistake a TOML file for
//! YAML or the reverse. Everything else y3 reads as its own TOML.
//!
//! YoMo's parser (`gopkg.in/yaml.v3` into a struct) ignores keys it does not know, so a
//! misspelt `credentail:` silently drops a downstream's credential there. Here every key is
//! either mapped or refused with an error naming it: `bridge` (YoMo's LLM and MCP bridges,
//! which y3 does not have), unknown keys anywhere, an `auth` that YoMo would silently not
//! apply (a `token` without `type`, or the reverse), and an `auth.type` other than `token`.
//! Required keys are YoMo's (`name`, `host`, `port`).

use std::net::{IpAddr, ToSocketAddrs};
use std::path::Path;

use serde_yaml_ng::{Mapping, Value};

use crate::config::{DownstreamConfig, MeshTransport, RouterConfig};

pub use crate::error::YomoYamlError;

/// Whether `path` names a YoMo zipper YAML file: its extension is `.yaml` or `.yml` (any
/// case).
pub fn is_yaml_path(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
}

/// Reads a YoMo zipper YAML file.
///
/// # Errors
/// [`YomoYamlError::Io`], or as [`from_yaml_str`].
pub fn from_file(path: &Path) -> Result<RouterConfig, YomoYamlError> {
    let text = std::fs::read_to_string(path).map_err(YomoYamlError::Io)?;
    from_yaml_str(&text)
}

/// The router configuration of YoMo zipper YAML: y3's defaults, with what the file says
/// mapped onto them (see the module docs).
///
/// # Errors
/// A [`YomoYamlError`] naming the first key that is not taken.
pub fn from_yaml_str(text: &str) -> Result<RouterConfig, YomoYamlError> {
    let root: Value =
        serde_yaml_ng::from_str(text).map_err(|e| YomoYamlError::Syntax(e.to_string()))?;
    let root = match root {
        Value::Mapping(m) => m,
        // An empty file: YoMo reports the first missing key.
        Value::Null => Mapping::new(),
        _ => {
            return Err(YomoYamlError::Syntax(
                "the top level is not a mapping".into(),
            ))
        }
    };
    let mut name = None;
    let mut host = None;
    let mut port = None;
    let mut token = None;
    let mut mesh = Vec::new();
    for (key, value) in &root {
        let key = key_text(key, "")?;
        match key.as_str() {
            "name" => name = Some(scalar(&key, value)?),
            "host" => host = Some(scalar(&key, value)?),
            "port" => port = Some(port_of(&key, value)?),
            "auth" => token = auth(value)?,
            "mesh" => mesh = downstreams(value)?,
            "bridge" => {
                return Err(YomoYamlError::Unsupported {
                    key,
                    why: "YoMo's LLM and MCP bridges are not part of y3: run them beside \
                          y3 serve (a YoMo zipper with only the bridge), or remove the key",
                })
            }
            _ => return Err(unknown(key)),
        }
    }
    let name = required("name", name)?;
    let host = required("host", host)?;
    let port = port
        .filter(|&p| p != 0)
        .ok_or_else(|| YomoYamlError::Missing { key: "port".into() })?;
    let mut config = RouterConfig::default();
    config.listen.quic = listen_addr(&host, port)?;
    config.listen.tcp = String::new();
    config.listen.metrics = String::new();
    if let Some(token) = token {
        config.auth.token = token;
    }
    // YoMo skips the entry that names this zipper itself (a shared mesh list).
    config.mesh.downstream = mesh.into_iter().filter(|d| d.name != name).collect();
    config.mesh.name = name;
    Ok(config)
}

/// A mapping key as text; `at` is the path of the mapping (empty at the top).
fn key_text(key: &Value, at: &str) -> Result<String, YomoYamlError> {
    match key {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(YomoYamlError::Invalid {
            key: if at.is_empty() {
                "(top level)".into()
            } else {
                at.into()
            },
            problem: "a key that is not text".into(),
        }),
    }
}

fn unknown(key: String) -> YomoYamlError {
    YomoYamlError::Unsupported {
        key,
        why: "not a key of YoMo v1.22's zipper config; y3 refuses it rather than ignore it \
              (see docs/migrating-from-yomo.md)",
    }
}

fn required(key: &str, value: Option<String>) -> Result<String, YomoYamlError> {
    value
        .filter(|v| !v.is_empty())
        .ok_or_else(|| YomoYamlError::Missing { key: key.into() })
}

/// A text value: a string, or a number or boolean as written (yaml.v3 decodes those into
/// Go strings too); null is empty.
fn scalar(key: &str, value: &Value) -> Result<String, YomoYamlError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Ok(String::new()),
        _ => Err(YomoYamlError::Invalid {
            key: key.into(),
            problem: "must be text".into(),
        }),
    }
}

/// A port number, 1..=65535 (0 and null read as absent, as YoMo's zero value).
fn port_of(key: &str, value: &Value) -> Result<u16, YomoYamlError> {
    let bad = || YomoYamlError::Invalid {
        key: key.into(),
        problem: format!("must be a port number, 1..=65535 (got {})", show(value)),
    };
    match value {
        Value::Null => Ok(0),
        Value::Number(n) => n
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// A value as the error message shows it.
fn show(value: &Value) -> String {
    serde_yaml_ng::to_string(value)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// The listen address of `host:port`: an IP address as it is, `localhost` as 127.0.0.1, any
/// other host name resolved now (its first address).
fn listen_addr(host: &str, port: u16) -> Result<String, YomoYamlError> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(std::net::SocketAddr::new(ip, port).to_string());
    }
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(format!("127.0.0.1:{port}"));
    }
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .map(|a| a.to_string())
        .ok_or_else(|| YomoYamlError::Invalid {
            key: "host".into(),
            problem: format!("{host:?} is not an IP address and does not resolve"),
        })
}

/// `auth`: `type: token` and `token: ...` together, or nothing. YoMo applies a token only
/// when both keys are there (whatever `type` says); y3 refuses what YoMo would silently
/// not apply.
fn auth(value: &Value) -> Result<Option<String>, YomoYamlError> {
    let map = match value {
        Value::Null => return Ok(None),
        Value::Mapping(m) => m,
        _ => {
            return Err(YomoYamlError::Invalid {
                key: "auth".into(),
                problem: "must be a mapping (type, token)".into(),
            })
        }
    };
    let mut kind = None;
    let mut token = None;
    for (key, value) in map {
        let key = format!("auth.{}", key_text(key, "auth")?);
        match key.as_str() {
            "auth.type" => kind = Some(scalar(&key, value)?),
            "auth.token" => token = Some(scalar(&key, value)?),
            _ => return Err(unknown(key)),
        }
    }
    match (kind, token) {
        (None, None) => Ok(None),
        (Some(kind), _) if kind != "token" => Err(YomoYamlError::Unsupported {
            key: "auth.type".into(),
            why: "the only authentication YoMo and y3 have is \"token\"",
        }),
        (Some(_), Some(token)) if !token.is_empty() => Ok(Some(token)),
        (Some(_), _) => Err(YomoYamlError::Missing {
            key: "auth.token".into(),
        }),
        (None, Some(_)) => Err(YomoYamlError::Missing {
            key: "auth.type".into(),
        }),
    }
}

/// `mesh`: downstream zippers by name, each with `host`, `port` and an optional
/// `credential`, in the file's order.
fn downstreams(value: &Value) -> Result<Vec<DownstreamConfig>, YomoYamlError> {
    let map = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Mapping(m) => m,
        _ => {
            return Err(YomoYamlError::Invalid {
                key: "mesh".into(),
                problem: "must be a mapping of zipper names".into(),
            })
        }
    };
    let mut out = Vec::new();
    for (name, entry) in map {
        let name = key_text(name, "mesh")?;
        let at = format!("mesh.{name}");
        let fields = match entry {
            Value::Mapping(m) => m,
            _ => {
                return Err(YomoYamlError::Invalid {
                    key: at,
                    problem: "must be a mapping (host, port, credential)".into(),
                })
            }
        };
        let (mut host, mut port, mut credential) = (String::new(), 0, String::new());
        for (key, value) in fields {
            let key = format!("{at}.{}", key_text(key, &at)?);
            match &key[at.len() + 1..] {
                "host" => host = scalar(&key, value)?,
                "port" => port = port_of(&key, value)?,
                "credential" => credential = scalar(&key, value)?,
                _ => return Err(unknown(key)),
            }
        }
        if host.is_empty() {
            return Err(YomoYamlError::Missing {
                key: format!("{at}.host"),
            });
        }
        if port == 0 {
            return Err(YomoYamlError::Missing {
                key: format!("{at}.port"),
            });
        }
        let addr = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        out.push(DownstreamConfig {
            name,
            addr,
            credential,
            transport: MeshTransport::Quic,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// YoMo v1.19.7's `example/4-cascading-zipper` configs, unchanged (testdata/yomo-configs).
    const ZIPPER_1: &str =
        include_str!("../../../testdata/yomo-configs/v1.19.7/4-cascading-zipper/zipper_1.yaml");
    const ZIPPER_2: &str =
        include_str!("../../../testdata/yomo-configs/v1.19.7/4-cascading-zipper/zipper_2.yaml");
    /// YoMo v1.22.0's sample zipper config (`test/config.yaml`), unchanged.
    const SAMPLE_V122: &str = include_str!("../../../testdata/yomo-configs/v1.22.0/config.yaml");

    fn err(text: &str) -> YomoYamlError {
        from_yaml_str(text).expect_err(text)
    }

    #[test]
    fn cascading_example_maps_every_key() {
        let c = from_yaml_str(ZIPPER_1).unwrap();
        assert_eq!(c.mesh.name, "zipper-1");
        assert_eq!(c.listen.quic, "0.0.0.0:9001");
        assert_eq!((c.listen.tcp.as_str(), c.listen.metrics.as_str()), ("", ""));
        assert_eq!(c.auth.token, "z1");
        // Its own entry is skipped, as YoMo does.
        assert_eq!(
            c.mesh.downstream,
            vec![DownstreamConfig {
                name: "zipper-2".into(),
                addr: "127.0.0.1:9002".into(),
                credential: "token:z2".into(),
                transport: MeshTransport::Quic,
            }]
        );
        c.validate().unwrap();
        let c = from_yaml_str(ZIPPER_2).unwrap();
        assert_eq!(
            (c.mesh.name.as_str(), c.listen.quic.as_str()),
            ("zipper-2", "0.0.0.0:9002")
        );
        assert_eq!(c.auth.token, "z2");
        assert_eq!(c.mesh.downstream.len(), 1);
        assert_eq!(c.mesh.downstream[0].addr, "127.0.0.1:9001");
        assert_eq!(c.mesh.downstream[0].credential, "token:z1");
        c.validate().unwrap();
    }

    #[test]
    fn v122_sample_is_refused_at_its_bridge() {
        let e = err(SAMPLE_V122);
        assert_eq!(e.kind(), "yaml_unsupported");
        assert!(
            e.to_string()
                .starts_with("bridge: YoMo's LLM and MCP bridges"),
            "{e}"
        );
        // Without the bridge, its mesh entries spelled `auth:` (which YoMo ignores, dropping
        // the credential) are named.
        let (head, tail) = SAMPLE_V122.split_once("### bridge ###").unwrap();
        let (_, mesh) = tail.split_once("### cascading mesh ###").unwrap();
        let e = err(&format!("{head}{mesh}"));
        assert_eq!(
            e.to_string().split(':').next(),
            Some("mesh.zipper-usa.auth"),
            "{e}"
        );
    }

    #[test]
    fn every_refusal_names_its_key() {
        let base = "name: z\nhost: 127.0.0.1\nport: 9000\n";
        for (extra, key, kind) in [
            ("bridge: {}\n", "bridge", "yaml_unsupported"),
            ("tls: true\n", "tls", "yaml_unsupported"),
            ("auth: {token: t}\n", "auth.type", "yaml_missing"),
            ("auth: {type: token}\n", "auth.token", "yaml_missing"),
            (
                "auth: {type: token, token: \"\"}\n",
                "auth.token",
                "yaml_missing",
            ),
            (
                "auth: {type: jwt, token: t}\n",
                "auth.type",
                "yaml_unsupported",
            ),
            (
                "auth: {type: token, token: t, user: u}\n",
                "auth.user",
                "yaml_unsupported",
            ),
            (
                "mesh: {b: {host: h, port: 1, credentail: x}}\n",
                "mesh.b.credentail",
                "yaml_unsupported",
            ),
            ("mesh: {b: {port: 1}}\n", "mesh.b.host", "yaml_missing"),
            ("mesh: {b: {host: h}}\n", "mesh.b.port", "yaml_missing"),
            (
                "mesh: {b: {host: h, port: 70000}}\n",
                "mesh.b.port",
                "yaml_invalid",
            ),
            ("mesh: [a]\n", "mesh", "yaml_invalid"),
        ] {
            let e = err(&format!("{base}{extra}"));
            assert_eq!(e.kind(), kind, "{extra}: {e}");
            assert!(e.to_string().contains(key), "{extra}: {e}");
        }
        for (text, key) in [
            ("host: 1.2.3.4\nport: 1\n", "name"),
            ("name: z\nport: 1\n", "host"),
            ("name: z\nhost: 1.2.3.4\n", "port"),
            ("name: z\nhost: 1.2.3.4\nport: 0\n", "port"),
            ("", "name"),
        ] {
            let e = err(text);
            assert_eq!(e.kind(), "yaml_missing");
            assert!(e.to_string().starts_with(key), "{e}");
        }
        assert_eq!(err("[1, 2]").kind(), "yaml_syntax");
        assert_eq!(err("name: [z").kind(), "yaml_syntax");
        assert_eq!(
            err("name: z\nhost: h\nport: \"9000\"\n").kind(),
            "yaml_invalid"
        );
    }

    #[test]
    fn hosts_and_names() {
        let c = from_yaml_str(
            "name: 7\nhost: localhost\nport: 9000\nauth:\nmesh:\n  b:\n    host: ::1\n    port: 9001\n",
        )
        .unwrap();
        assert_eq!(c.mesh.name, "7");
        assert_eq!(c.listen.quic, "127.0.0.1:9000");
        assert!(!c.auth.has_token());
        assert_eq!(c.mesh.downstream[0].addr, "[::1]:9001");
        assert_eq!(c.mesh.downstream[0].credential, "");
        let c = from_yaml_str("name: z\nhost: \"::\"\nport: 9000\n").unwrap();
        assert_eq!(c.listen.quic, "[::]:9000");
    }

    #[test]
    fn yaml_by_extension_only() {
        for (path, yaml) in [
            ("zipper.yaml", true),
            ("a/zipper.YML", true),
            ("router.toml", false),
            ("yaml", false),
            ("zipper.yaml.bak", false),
        ] {
            assert_eq!(is_yaml_path(Path::new(path)), yaml, "{path}");
        }
    }
}
