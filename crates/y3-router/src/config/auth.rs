//! `[auth]`: tokens, the tags each allows, and the slowing of failed handshakes.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::secret::read_secret;
use crate::error::RouterError;

/// `[auth]`: tokens, their permissions, and the throttling of failed handshakes.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The main token, allowing every tag; empty: none (and with no `tokens`, no token is
    /// required).
    pub token: String,
    /// A file holding the main token (instead of `token`).
    pub token_file: PathBuf,
    /// Listen beyond loopback without any token (refused otherwise).
    pub allow_insecure: bool,
    /// Wrong credentials from one address (an IPv4 address, an IPv6 /64) refused at once;
    /// each further one within the window is refused after a delay (the tarpit,
    /// `throttle.rs`). A right credential is never delayed.
    pub max_failures: u32,
    /// An address's failures are forgotten once it has had none for this long.
    pub failure_window_ms: u64,
    /// The delay of the first delayed refusal; it doubles with each further failure.
    pub tarpit_initial_ms: u64,
    /// The longest delay (kept under the 5 s y3's clients wait for a handshake answer);
    /// 0 turns the tarpit off.
    pub tarpit_max_ms: u64,
    /// Delayed refusals held at once per address. While all are held, that address's next
    /// handshakes are turned away *unchecked*, with a code that makes clients retry
    /// (`rejected{reason="throttled"}`), so that an attacker learns no more guesses than
    /// this per `tarpit_max_ms`, however many connections it opens.
    pub tarpit_max_in_flight: u32,
    /// Removed (addresses are no longer locked out): set, the configuration is refused,
    /// naming the `tarpit_*` settings that replace it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttle_ms: Option<u64>,
    /// Further tokens (`[[auth.tokens]]`), each allowing only the tags it lists.
    pub tokens: Vec<TokenConfig>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            token: String::new(),
            token_file: PathBuf::new(),
            allow_insecure: false,
            max_failures: 5,
            failure_window_ms: 60_000,
            tarpit_initial_ms: 250,
            tarpit_max_ms: 3_000,
            tarpit_max_in_flight: 16,
            throttle_ms: None,
            tokens: Vec::new(),
        }
    }
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("token", &redacted(&self.token))
            .field("token_file", &self.token_file)
            .field("allow_insecure", &self.allow_insecure)
            .field("max_failures", &self.max_failures)
            .field("failure_window_ms", &self.failure_window_ms)
            .field("tarpit_initial_ms", &self.tarpit_initial_ms)
            .field("tarpit_max_ms", &self.tarpit_max_ms)
            .field("tarpit_max_in_flight", &self.tarpit_max_in_flight)
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl AuthConfig {
    /// The tarpit these settings describe.
    pub fn tarpit(&self) -> TarpitConfig {
        TarpitConfig {
            free_failures: self.max_failures,
            window: Duration::from_millis(self.failure_window_ms),
            initial: Duration::from_millis(self.tarpit_initial_ms),
            max: Duration::from_millis(self.tarpit_max_ms),
            max_in_flight: self.tarpit_max_in_flight,
        }
    }

    /// Whether any token is configured (then every handshake must carry one).
    pub fn has_token(&self) -> bool {
        !self.token.is_empty() || !self.token_file.as_os_str().is_empty() || !self.tokens.is_empty()
    }
}

/// `[[auth.tokens]]`: a token and the tags it allows. A tag list that is absent allows every
/// tag; an empty one allows none.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TokenConfig {
    /// A label for logs (the token itself never is).
    pub name: String,
    /// The token.
    pub token: String,
    /// A file holding the token (instead of `token`).
    pub token_file: PathBuf,
    /// Tags its holder may send data frames on; absent: every tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub publish: Option<Vec<u32>>,
    /// Tags its holder may observe; absent: every tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observe: Option<Vec<u32>>,
}

impl fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenConfig")
            .field("name", &self.name)
            .field("token", &redacted(&self.token))
            .field("token_file", &self.token_file)
            .field("publish", &self.publish)
            .field("observe", &self.observe)
            .finish()
    }
}

/// What `Debug` shows of a secret: whether it is set.
pub(super) fn redacted(secret: &str) -> Option<&'static str> {
    (!secret.is_empty()).then_some("<redacted>")
}

/// One of `value` and the contents of `file`, whichever is set.
pub(crate) fn secret(
    value: &str,
    file: &Path,
    field: &'static str,
) -> Result<Option<String>, RouterError> {
    match (value.is_empty(), file.as_os_str().is_empty()) {
        (true, true) => Ok(None),
        (false, true) => Ok(Some(value.to_owned())),
        (true, false) => read_secret(field, file).map(Some),
        (false, false) => Err(RouterError::Config {
            field,
            problem: "set the token or its file, not both",
        }),
    }
}

/// Tags no client may write (`yomo serve`'s rule).
pub const RESERVED_TAGS: std::ops::RangeInclusive<u32> = 0xf000..=0xffff;

/// Which tags a client may publish and observe: what its token allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permissions {
    publish: Option<Vec<u32>>,
    observe: Option<Vec<u32>>,
}

impl Permissions {
    /// Every tag, both ways: the main token's, or anyone's when no token is required.
    pub const ALL: Permissions = Permissions {
        publish: None,
        observe: None,
    };

    /// The tags in `publish` and `observe`; `None`: every tag.
    pub fn new(publish: Option<Vec<u32>>, observe: Option<Vec<u32>>) -> Permissions {
        let sorted = |tags: Option<Vec<u32>>| {
            tags.map(|mut t| {
                t.sort_unstable();
                t.dedup();
                t
            })
        };
        Permissions {
            publish: sorted(publish),
            observe: sorted(observe),
        }
    }

    /// Whether data frames on `tag` may be sent.
    pub fn may_publish(&self, tag: u32) -> bool {
        allows(self.publish.as_deref(), tag)
    }

    /// Whether `tag` may be observed.
    pub fn may_observe(&self, tag: u32) -> bool {
        allows(self.observe.as_deref(), tag)
    }
}

fn allows(tags: Option<&[u32]>, tag: u32) -> bool {
    tags.is_none_or(|tags| tags.binary_search(&tag).is_ok())
}

/// One token of `[[auth.tokens]]`: its holder's name and what it allows.
#[derive(Clone, PartialEq, Eq)]
pub struct Grant {
    /// A label for logs.
    pub name: String,
    /// The token.
    pub token: String,
    /// The tags it allows.
    pub permissions: Arc<Permissions>,
}

impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the token: configurations end up in logs.
        f.debug_struct("Grant")
            .field("name", &self.name)
            .field("permissions", &self.permissions)
            .finish_non_exhaustive()
    }
}

/// How the tarpit slows failing handshakes down (`[auth]` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TarpitConfig {
    /// Wrong credentials per address within `window` refused at once.
    pub free_failures: u32,
    /// An address's failures are forgotten this long after its last one.
    pub window: Duration,
    /// The delay of the first slowed refusal; it doubles with each further failure.
    pub initial: Duration,
    /// The longest delay; zero turns the tarpit off (every refusal at once, no slots).
    pub max: Duration,
    /// Handshakes of one address held in the tarpit (or being checked) at once.
    pub max_in_flight: u32,
}

impl TarpitConfig {
    /// The delay of a refusal that is the address's `failures`-th within the window.
    pub fn delay(&self, failures: u32) -> Duration {
        match failures.checked_sub(self.free_failures) {
            None | Some(0) => Duration::ZERO,
            Some(k) => self
                .initial
                .saturating_mul(1u32 << (k - 1).min(20))
                .min(self.max),
        }
    }
}
