//! The log `y3 serve` (and `y3 demo`) writes on stderr: text or JSON lines, a filter from
//! `RUST_LOG` or `[log] level`, checked before use (a bad one is an error naming it, not a
//! silent fallback) and replaceable while running (SIGHUP).

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};
use y3_router::config::LogFormat;

use crate::error::CliError;

/// The environment variable that overrides the configured level.
pub const RUST_LOG: &str = "RUST_LOG";

/// Changes the running log's filter.
pub struct LogHandle {
    filter: Option<reload::Handle<EnvFilter, Registry>>,
    /// Whether `RUST_LOG` set the filter (a reload of `[log] level` then leaves it).
    pub from_env: bool,
}

/// `directives` as a filter, or an error naming them and `source` (`RUST_LOG`, `[log]
/// level`).
///
/// # Errors
/// `bad_log_filter` (exit 2).
pub fn parse_filter(directives: &str, source: &str) -> Result<EnvFilter, CliError> {
    EnvFilter::builder().parse(directives).map_err(|e| {
        CliError::bad_input(
            "bad_log_filter",
            format!("{source}={directives:?} is not a log filter: {e}"),
        )
        .hint("give a level (error warn info debug trace) or directives like \"info,y3_router=debug\"")
    })
}

/// The filter `RUST_LOG` gives, if it is set (and not empty).
///
/// # Errors
/// As [`parse_filter`].
fn env_filter() -> Result<Option<EnvFilter>, CliError> {
    match std::env::var(RUST_LOG) {
        Ok(text) if !text.trim().is_empty() => parse_filter(&text, RUST_LOG).map(Some),
        _ => Ok(None),
    }
}

/// Installs the log: `RUST_LOG` if set, else `level`; as `format`. A stderr that cannot
/// be written loses the logs, nothing else (by default the subscriber would report that on
/// stderr again, with `eprintln!`, which panics).
///
/// # Errors
/// `bad_log_filter` for a `RUST_LOG` or `level` that is not a filter.
pub fn init(level: &str, format: LogFormat) -> Result<LogHandle, CliError> {
    let (filter, from_env) = match env_filter()? {
        Some(filter) => (filter, true),
        None => (parse_filter(level, "[log] level")?, false),
    };
    let (filter, handle) = reload::Layer::new(filter);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let output: Box<dyn Layer<_> + Send + Sync> = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .log_internal_errors(false)
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .log_internal_errors(false)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    let installed = tracing_subscriber::registry()
        .with(filter)
        .with(output)
        .try_init()
        .is_ok();
    Ok(LogHandle {
        filter: installed.then_some(handle),
        from_env,
    })
}

impl LogHandle {
    /// Applies `level` (a reload's `[log] level`), unless `RUST_LOG` set the filter.
    ///
    /// # Errors
    /// As [`parse_filter`]; the running filter is kept then.
    pub fn set_level(&self, level: &str) -> Result<bool, CliError> {
        let filter = parse_filter(level, "[log] level")?;
        if self.from_env {
            return Ok(false);
        }
        if let Some(handle) = &self.filter {
            let _ = handle.reload(filter);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_filters_name_themselves() {
        let err = parse_filter("info,y3=bogus", RUST_LOG).unwrap_err();
        assert_eq!(err.kind, "bad_log_filter");
        assert!(
            err.message.contains("RUST_LOG=\"info,y3=bogus\""),
            "{}",
            err.message
        );
        assert!(parse_filter("warn,y3_router=debug", RUST_LOG).is_ok());
    }
}
