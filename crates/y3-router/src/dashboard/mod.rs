//! The live dashboard: one static page (HTML, CSS and JavaScript in `index.html`, no build
//! step) served by the metrics listener at `/` and `/dashboard`. It polls `/varz`, `/connz`
//! and `/tagz` every second and shows rates, connections, tags, drops, the delivery ledger
//! and the mesh and federation links. With `listen.metrics_token` set, it asks for the token
//! (or reads it from the page's `#token=...` fragment, which browsers never send) and sends
//! it as a bearer token.

/// The page.
pub(crate) const INDEX: &str = include_str!("index.html");
