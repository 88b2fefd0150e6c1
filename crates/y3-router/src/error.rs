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
    YomoYaml(#[from] crate::yomo_yaml::YomoYamlError),
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
