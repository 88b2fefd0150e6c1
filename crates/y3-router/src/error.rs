//! [`RouterError`]: why a router could not start. Once running, the router does not fail as
//! a whole: a bad client gets a goaway and a counted metric, and everyone else goes on.

use std::io;
use std::path::PathBuf;

use y3_transport::TransportError;

/// Why a router could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RouterError {
    /// A configuration value is invalid.
    #[error("config: {field}: {problem}")]
    Config {
        /// The field, `section.key`.
        field: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The configuration file could not be read.
    #[error("cannot read the config file: {0}")]
    ConfigIo(#[source] io::Error),
    /// The configuration file is not valid TOML for this schema.
    #[error("invalid config: {0}")]
    ConfigToml(#[from] toml::de::Error),
    /// A listener could not be bound.
    #[error("cannot listen on {what} {addr}: {source}")]
    Bind {
        /// `tcp`, `quic` or `metrics`.
        what: &'static str,
        /// The address it was to listen on.
        addr: std::net::SocketAddr,
        /// The bind error.
        #[source]
        source: io::Error,
    },
    /// A file could not be written (the dev certificate).
    #[error("cannot write {what}: {source}")]
    Write {
        /// What was being written.
        what: &'static str,
        /// The write error.
        #[source]
        source: io::Error,
    },
    /// A token file could not be read.
    #[error("cannot read {field} {}: {source}", path.display())]
    Secret {
        /// The field naming the file.
        field: &'static str,
        /// The file.
        path: PathBuf,
        /// The read error.
        #[source]
        source: io::Error,
    },
    /// Certificates or TLS settings.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// A YoMo zipper YAML file that was not taken (`yomo_yaml.rs`).
    #[error(transparent)]
    YomoYaml(#[from] YomoYamlError),
    /// Another router holds this router's `federation.name` (`federation/claim.rs`).
    #[error(
        "federation.name {name:?} is in use by another router ({holder}); every router of a \
         federation needs its own name"
    )]
    FederationNameTaken {
        /// The name.
        name: String,
        /// The holder, as it describes itself (host, process, start time).
        holder: String,
    },
}

impl RouterError {
    /// The stable snake_case name.
    pub fn kind(&self) -> &'static str {
        match self {
            RouterError::Config { .. } => "config",
            RouterError::ConfigIo(_) => "config_io",
            RouterError::ConfigToml(_) => "config_toml",
            RouterError::Bind { .. } => "bind",
            RouterError::Write { .. } => "write",
            RouterError::Secret { .. } => "secret",
            RouterError::Transport(e) => e.kind(),
            RouterError::YomoYaml(e) => e.kind(),
            RouterError::FederationNameTaken { .. } => "federation_name_taken",
        }
    }
}

/// Why a YoMo zipper YAML file was not taken.
#[derive(Debug, thiserror::Error)]
pub enum YomoYamlError {
    /// The file could not be read.
    #[error("cannot read the config file: {0}")]
    Io(#[source] std::io::Error),
    /// Not YAML, or not a mapping at the top.
    #[error("not YoMo's zipper YAML: {0}")]
    Syntax(String),
    /// A key y3 does not have, named with its path (`bridge`, `mesh.zipper-2.auth`).
    #[error("{key}: {why}")]
    Unsupported {
        /// The key's path.
        key: String,
        /// Why it is refused, and what to do instead.
        why: &'static str,
    },
    /// A value of the wrong type or out of range.
    #[error("{key}: {problem}")]
    Invalid {
        /// The key's path.
        key: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A key YoMo requires is absent or empty.
    #[error("{key} is required (as yomo serve requires it)")]
    Missing {
        /// The key's path.
        key: String,
    },
}

impl YomoYamlError {
    /// The stable snake_case name.
    pub fn kind(&self) -> &'static str {
        match self {
            YomoYamlError::Io(_) => "config_io",
            YomoYamlError::Syntax(_) => "yaml_syntax",
            YomoYamlError::Unsupported { .. } => "yaml_unsupported",
            YomoYamlError::Invalid { .. } => "yaml_invalid",
            YomoYamlError::Missing { .. } => "yaml_missing",
        }
    }
}
