//! The lab's command line: one module per suite's arguments (`codec` also holds `serde`'s),
//! each calling into the library (`y3_lab::codec`, `y3_lab::serde_suite`, `y3_lab::net`).

pub mod codec;
pub mod net;
pub mod pipeline;
