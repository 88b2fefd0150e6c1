//! `[log]` and `[state]`: the process's log and what it keeps across restarts.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[log]`: the log `y3 serve` writes on stderr. Connects and closes are logged at debug;
/// a summary at info every `summary_secs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// Filter directives, as `RUST_LOG` takes them (`"info"`, `"warn,y3_router=debug"`);
    /// `RUST_LOG`, when set, overrides it. A reload (SIGHUP) applies a new value.
    pub level: String,
    /// `"text"` (human-readable) or `"json"` (one JSON object per line).
    pub format: LogFormat,
    /// Seconds between the periodic summary lines at info (connections, frames, drops);
    /// 0: none.
    pub summary_secs: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            format: LogFormat::Text,
            summary_secs: 60,
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (tracing-subscriber's JSON format).
    Json,
}

/// `[state]`: the router's state directory, which keeps the secret its QUIC listener's
/// stateless-reset key derives from and the listener's clients (`state.rs`), so that after
/// a crash and restart the old connections' clients are reset at once and reconnect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StateConfig {
    /// The directory; empty: `$STATE_DIRECTORY` (systemd's `StateDirectory=`), else
    /// `$XDG_STATE_HOME/y3`, else `$HOME/.local/state/y3`.
    pub dir: PathBuf,
    /// Keep state there; `false`: nothing is written, and each start uses a new secret
    /// (a restarted router's old clients then wait out their idle timeout).
    pub persist: bool,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            dir: PathBuf::new(),
            persist: true,
        }
    }
}
