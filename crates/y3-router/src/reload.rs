//! Reloading a running router's configuration (SIGHUP, as NATS does): what can change
//! without dropping a connection is applied, the rest is reported as needing a restart.
//!
//! ```text
//!  applied at once, to connections made from now on    reported, not applied
//!  ────────────────────────────────────────────────     ─────────────────────
//!  auth.token, auth.token_file, [[auth.tokens]]          listen, tls, queue, limits,
//!  (each token's publish/observe permissions)            shutdown, mesh, federation,
//!  [filters] (limits, filters attached by name)          state, the rest of [auth],
//!  [log] level (applied by `y3 serve`)                   [log] format, summary_secs
//! ```
//!
//! Open connections keep the admission they were let in under: a reload never drops one
//! (a token taken away stops new connections with it).

use std::sync::Arc;

use crate::config::RouterConfig;
use crate::error::RouterError;
use crate::session::{Admission, Grant};
use crate::shared::Shared;

/// What a reload did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// Whether tokens, permissions or filters changed (and were applied).
    pub applied: bool,
    /// Sections that changed but need a restart to apply (`"listen"`, `"tls"`, ...).
    pub needs_restart: Vec<&'static str>,
}

/// The admission rules of `config`, its tokens already read.
pub(crate) fn admission(config: &RouterConfig, token: String, grants: Vec<Grant>) -> Admission {
    Admission {
        token,
        grants,
        max_observed_tags: config.limits.max_observed_tags,
        max_name_len: config.limits.max_name_len,
        max_hops: config.limits.max_hops,
        metadata_limits: config.limits.metadata(),
        filter_limits: config.filters.limits(),
        attached: config.filters.attach.clone(),
    }
}

impl Shared {
    /// The admission rules new connections are let in under.
    pub(crate) fn admission(&self) -> Arc<Admission> {
        self.admission
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// `config` with the reloadable parts of `from`: what is left to compare needs a restart.
fn with_reloadable(mut config: RouterConfig, from: &RouterConfig) -> RouterConfig {
    config.auth.token.clone_from(&from.auth.token);
    config.auth.token_file.clone_from(&from.auth.token_file);
    config.auth.tokens.clone_from(&from.auth.tokens);
    config.filters = from.filters.clone();
    config.log.level.clone_from(&from.log.level);
    config
}

/// The top-level sections that differ between `old` and `new`.
fn changed_sections(old: &RouterConfig, new: &RouterConfig) -> Vec<&'static str> {
    let mut changed = Vec::new();
    let mut check = |name, differs: bool| {
        if differs {
            changed.push(name);
        }
    };
    check("listen", old.listen != new.listen);
    check("tls", old.tls != new.tls);
    check("auth", old.auth != new.auth);
    check("queue", old.queue != new.queue);
    check("limits", old.limits != new.limits);
    check("shutdown", old.shutdown != new.shutdown);
    check("mesh", old.mesh != new.mesh);
    check("filters", old.filters != new.filters);
    check("federation", old.federation != new.federation);
    check("state", old.state != new.state);
    // [log] is the process's, applied by `y3 serve` (level) or needing a restart (format).
    check(
        "log",
        old.log.format != new.log.format || old.log.summary_secs != new.log.summary_secs,
    );
    changed
}

/// Applies `config` to the router `shared` runs (see the module docs).
pub(crate) fn reload(shared: &Shared, config: &RouterConfig) -> Result<Reloaded, RouterError> {
    let mut loaded = shared.loaded.lock().unwrap_or_else(|e| e.into_inner());
    // The rules a restart would apply, checked whole before anything changes.
    config.validate()?;
    let (token, grants) = config.tokens()?;
    let reloadable = with_reloadable(loaded.clone(), config);
    let applied = reloadable != *loaded;
    // Limits the admission copies are taken from the running configuration: they need a
    // restart, as everything in `limits` does.
    let next = admission(&reloadable, token, grants);
    *shared.admission.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
    let needs_restart = changed_sections(&reloadable, config);
    tracing::info!(
        applied,
        tokens = config.auth.tokens.len(),
        auth = !config.auth.token.is_empty() || !config.auth.token_file.as_os_str().is_empty(),
        "configuration reloaded: tokens, permissions and filters"
    );
    for section in &needs_restart {
        tracing::warn!(
            section,
            "configuration changed in [{section}]: needs restart (not applied)"
        );
    }
    *loaded = reloadable;
    Ok(Reloaded {
        applied,
        needs_restart,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_that_need_a_restart_are_named() {
        let old = RouterConfig::ephemeral();
        let mut new = old.clone();
        new.auth.token = "t".into();
        new.queue.capacity += 1;
        new.listen.tcp = "127.0.0.1:1".into();
        let kept = with_reloadable(old.clone(), &new);
        assert_eq!(kept.auth.token, "t");
        assert_eq!(changed_sections(&kept, &new), ["listen", "queue"]);
        assert!(changed_sections(&old, &old).is_empty());
    }
}
