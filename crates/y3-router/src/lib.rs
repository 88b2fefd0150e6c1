//! The y3 router: connects sources, stream functions and sinks, routing data frames by tag.
//!
//! The pure parts have no IO and no clock: [`queue`] (bounded queue and policy), [`table`]
//! (tag → subscribers, never back to the issuer) and [`session`] (the per-connection
//! protocol state machine, quinn-style `handle_*(now, ..)` in, events out). [`config`] is
//! the TOML configuration, every field defaulted.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod config;
mod error;
pub mod queue;
pub mod session;
pub mod table;

pub use config::RouterConfig;
pub use error::RouterError;
pub use queue::Policy;
