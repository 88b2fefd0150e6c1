//! `y3 serve`: run a router (QUIC + TCP listeners, Prometheus metrics) until Ctrl-C, then
//! drain gracefully.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use y3_router::config::LogFormat;
use y3_router::ready::Ready;
use y3_router::{yomo_yaml, Policy, Router, RouterConfig, RouterHandle};
use y3_transport::tls::{
    default_dev_cert_path, default_dev_cert_path_for, fingerprint_hex, YomoTlsEnv,
};

use crate::error::CliError;
use crate::send::TOKEN_ENV;

/// The queue policy, as the command line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// Hold sources back while a subscriber's queue is full (lossless).
    Block,
    /// Drop the oldest queued frames, counting each (real-time).
    DropOldest,
}

impl From<PolicyArg> for Policy {
    fn from(arg: PolicyArg) -> Policy {
        match arg {
            PolicyArg::Block => Policy::Block,
            PolicyArg::DropOldest => Policy::DropOldest,
        }
    }
}

/// The log format, as the command line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormatArg {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

impl From<LogFormatArg> for LogFormat {
    fn from(arg: LogFormatArg) -> LogFormat {
        match arg {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        }
    }
}

/// Options of `y3 serve`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Run a router (a YoMo v1.22 zipper): sources → stream functions → sinks over QUIC and TCP",
    long_about = "Run a router with QUIC and TCP listeners and a Prometheus metrics endpoint until
Ctrl-C or SIGTERM, then drain: y3 sources are told to stop, YoMo clients are closed with a code
that makes them reconnect to the router's successor, in-flight frames are delivered.

The router speaks YoMo v1.22's wire protocol (QUIC, ALPN yomo): existing YoMo sources, stream
functions and zippers connect unchanged (spec/frames.md). Every setting has a default (TCP and
QUIC on 127.0.0.1:9000, metrics on 127.0.0.1:9002, block policy, no token, no mesh);
-c/--config reads a TOML file (see --print-config for every key), or YoMo's zipper YAML
(`yomo serve -c zipper.yaml`) when the file name ends in .yaml or .yml: name, host, port, auth
and mesh map onto y3's settings (QUIC on host:port, TCP and metrics off unless the flags turn
them on) and keys y3 does not have (bridge, ...) are refused by name; --print-config shows the
TOML it maps to. Y3_TOKEN overrides the file's token and flags override both. Without a certificate, QUIC uses a generated self-signed
certificate, kept with its key in the state directory ([state] dir) per listener address and
reused until 30 days before it expires, so its SHA-256 fingerprint (printed: `y3
send/observe --pin HEX`) survives restarts. Once the listeners are bound, the certificate is
written (mode 0600) to a per-user directory ($XDG_RUNTIME_DIR/y3 or ~/.cache/y3, one file
per address), where `y3 send/observe --transport quic` find it.

SIGHUP reloads the configuration without dropping a connection: tokens, their permissions,
content filters and [log] level apply at once (to connections made from then on); any other
change is logged as \"needs restart\" and not applied; a file that does not load is refused
and the running configuration kept. Under systemd (NOTIFY_SOCKET, Type=notify) it reports
READY=1, RELOADING=1 around a reload, and STOPPING=1.

Logs go to stderr, as text or --log-format json; RUST_LOG (e.g. \"info,y3_router=debug\")
overrides [log] level, and a filter that does not parse stops y3 serve with an error naming
it. Connects and closes are logged at debug; a summary line (connections, frames, drops)
at info every [log] summary_secs (60).

Listening beyond loopback (e.g. --tcp 0.0.0.0:9000) needs a token (--token-file, Y3_TOKEN,
auth.token_file) or --allow-insecure. Wrong tokens are slowed down per address (a tarpit); a
right token is never held up.

Mutual TLS: --client-ca (tls.client_ca) requires client certificates on QUIC and TLS/TCP.
YoMo's own variables work as they do for `yomo serve`: YOMO_TLS_CERT_FILE/YOMO_TLS_KEY_FILE
name the certificate, YOMO_TLS_VERIFY_PEER=true with YOMO_TLS_CACERT_FILE requires client
certificates. They fill in what the file and flags leave unset; where they disagree, y3
serve stops with an error.",
    after_help = "Examples:
  y3 serve
  Y3_TOKEN=secret y3 serve --policy drop-oldest --metrics 127.0.0.1:9100
  y3 serve --tcp 0.0.0.0:9000 --tcp-tls --token-file /etc/y3/token
  y3 serve --config router.toml
  y3 serve -c zipper.yaml                      # YoMo's zipper config, unchanged
  y3 serve -c zipper.yaml --print-config > router.toml
  y3 serve --print-config > router.toml
  y3 serve --tcp 127.0.0.1:0 --quic 127.0.0.1:0 --ready-file ready.json   # ports the system picks"
)]
pub struct ServeArgs {
    /// Configuration file: y3's TOML, or YoMo's zipper YAML when its name ends in .yaml or
    /// .yml (`yomo serve -c zipper.yaml` → `y3 serve -c zipper.yaml`; keys y3 does not have
    /// are refused, docs/migrating-from-yomo.md).
    #[arg(short = 'c', long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// TCP listen address ("" turns it off).
    #[arg(long, value_name = "HOST:PORT")]
    pub tcp: Option<String>,
    /// QUIC listen address ("" turns it off).
    #[arg(long, value_name = "HOST:PORT")]
    pub quic: Option<String>,
    /// Metrics listen address ("" turns it off).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics: Option<String>,
    /// Serve TLS on the TCP listener too.
    #[arg(long)]
    pub tcp_tls: bool,
    /// Token every client must present. Other users can read it in the process list:
    /// prefer --token-file or the environment variable Y3_TOKEN.
    #[arg(long)]
    pub token: Option<String>,
    /// File holding the token every client must present.
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// Listen beyond loopback without a token (refused otherwise).
    #[arg(long)]
    pub allow_insecure: bool,
    /// File holding a bearer token that GET /metrics requires.
    #[arg(long, value_name = "FILE")]
    pub metrics_token_file: Option<PathBuf>,
    /// Full-queue policy.
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// Frames queued per subscriber.
    #[arg(long, value_name = "N")]
    pub queue_capacity: Option<usize>,
    /// Where to write a generated dev certificate (default: $XDG_RUNTIME_DIR/y3 or
    /// ~/.cache/y3, dev-cert-ADDRESS.pem after the QUIC, else TCP, listener; dev-cert.pem
    /// for an ephemeral port).
    #[arg(long, value_name = "FILE")]
    pub dev_cert_out: Option<PathBuf>,
    /// PEM certificate chain to serve (tls.cert; YoMo: YOMO_TLS_CERT_FILE).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (tls.key; YoMo: YOMO_TLS_KEY_FILE).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates issued by this PEM CA bundle on QUIC and TLS/TCP
    /// (tls.client_ca; YoMo: YOMO_TLS_VERIFY_PEER=true with YOMO_TLS_CACERT_FILE).
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,
    /// Log format on stderr (`[log] format`): text, or one JSON object per line.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormatArg>,
    /// Print the effective configuration as TOML, each key under its documentation, and
    /// exit (the same text as docs/configuration.md).
    #[arg(long)]
    pub print_config: bool,
    /// After the drain, write the final metrics (Prometheus text) to FILE: the totals of
    /// the last interval, which a scraper misses.
    #[arg(long, value_name = "FILE")]
    pub final_metrics: Option<PathBuf>,
    /// Once every listener is bound, write one JSON document to FILE (atomically: a
    /// temporary file renamed over it): pid, version, each listener's bound address, the
    /// certificate's SHA-256 and the dev certificate's path, the config file. Removed when
    /// the router stops. Layout: docs/operations.md, "The ready file".
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<PathBuf>,
}

impl ServeArgs {
    /// The configuration: defaults, then the file, then `Y3_TOKEN`, then the flags; YoMo's
    /// `YOMO_TLS_*` variables fill in `[tls]` where neither sets it.
    ///
    /// # Errors
    /// Config file errors, and a `YOMO_TLS_*` variable that disagrees with the file or a
    /// flag.
    pub fn config(&self) -> anyhow::Result<RouterConfig> {
        let mut config = self.config_without_env()?;
        let yomo = YomoTlsEnv::from_env();
        if yomo.misspelt_ca && yomo.ca_cert_file.is_none() {
            crate::send::warn("YOMO_TLS_CA_CERT_FILE is ignored (as YoMo ignores it): YoMo and y3 read YOMO_TLS_CACERT_FILE");
        }
        config.tls.merge_yomo_env(&yomo)?;
        for (flag, addr) in [
            ("--tcp", &mut config.listen.tcp),
            ("--quic", &mut config.listen.quic),
            ("--metrics", &mut config.listen.metrics),
        ] {
            resolve_listen(flag, addr)?;
        }
        let env = std::env::var(TOKEN_ENV).unwrap_or_default();
        if self.token.is_none() && self.token_file.is_none() && !env.trim().is_empty() {
            config.auth.token = env.trim().to_owned();
            config.auth.token_file = PathBuf::new();
        }
        Ok(config)
    }

    /// The configuration without `Y3_TOKEN` (what `--print-config` shows: no secret from
    /// the environment ends up in a file).
    fn config_without_env(&self) -> anyhow::Result<RouterConfig> {
        let mut config = match &self.config {
            Some(path) if yomo_yaml::is_yaml_path(path) => yomo_yaml::from_file(path)
                .map_err(y3_router::RouterError::from)
                .with_context(|| format!("YoMo zipper config {}", path.display()))?,
            Some(path) => RouterConfig::from_file(path).map_err(|e| toml_error(e, path))?,
            None => RouterConfig::default(),
        };
        if let Some(tcp) = &self.tcp {
            config.listen.tcp = tcp.clone();
        }
        if let Some(quic) = &self.quic {
            config.listen.quic = quic.clone();
        }
        if let Some(metrics) = &self.metrics {
            config.listen.metrics = metrics.clone();
        }
        if self.tcp_tls {
            config.listen.tcp_tls = true;
        }
        if let Some(token) = &self.token {
            config.auth.token = token.clone();
            config.auth.token_file = PathBuf::new();
        }
        if let Some(file) = &self.token_file {
            config.auth.token = String::new();
            config.auth.token_file = file.clone();
        }
        if self.allow_insecure {
            config.auth.allow_insecure = true;
        }
        if let Some(file) = &self.metrics_token_file {
            config.listen.metrics_token = String::new();
            config.listen.metrics_token_file = file.clone();
        }
        if let Some(policy) = self.policy {
            config.queue.policy = policy.into();
        }
        if let Some(capacity) = self.queue_capacity {
            config.queue.capacity = capacity;
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            config.tls.cert = cert.clone();
            config.tls.key = key.clone();
        }
        if let Some(ca) = &self.client_ca {
            config.tls.client_ca = ca.clone();
        }
        if let Some(format) = self.log_format {
            config.log.format = format.into();
        }
        if let Some(out) = &self.dev_cert_out {
            config.tls.dev_cert_out = out.clone();
        } else if config.tls.dev_cert_out.as_os_str().is_empty() {
            // Named after the QUIC listener (else TCP's): routers on one host keep theirs.
            let listener = [&config.listen.quic, &config.listen.tcp]
                .into_iter()
                .find_map(|addr| addr.parse::<std::net::SocketAddr>().ok());
            config.tls.dev_cert_out =
                listener.map_or_else(default_dev_cert_path, default_dev_cert_path_for);
        }
        Ok(config)
    }
}

/// A listen address given by host name (`localhost:9000`) as the address it names: its
/// first IPv4 address, else its first. An IP address (or "", off) is left as it is.
///
/// # Errors
/// `bad_address` for a name that does not resolve.
fn resolve_listen(flag: &str, addr: &mut String) -> Result<(), CliError> {
    use std::net::ToSocketAddrs;
    if addr.is_empty() || addr.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(());
    }
    let Ok(found) = addr.to_socket_addrs() else {
        // Not HOST:PORT at all: the config's own check names the field.
        return Ok(());
    };
    let found: Vec<_> = found.collect();
    let Some(first) = found.iter().find(|a| a.is_ipv4()).or(found.first()) else {
        let message = format!("{flag} {addr:?}: the name has no address");
        return Err(CliError::bad_input("bad_address", message));
    };
    *addr = first.to_string();
    Ok(())
}

/// A TOML config error as `FILE:LINE:COL: what is wrong`, with a hint when the file is
/// YoMo's zipper YAML under another name (YAML is told by the name:
/// `yomo_yaml::is_yaml_path`).
fn toml_error(e: y3_router::RouterError, path: &std::path::Path) -> anyhow::Error {
    use y3_router::RouterError as R;
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let yaml = matches!(e, R::ConfigToml(_)) && yomo_yaml::from_yaml_str(&text).is_ok();
    let file = path.display();
    let error = match &e {
        R::ConfigToml(toml) => {
            let at = toml.span().map_or_else(String::new, |span| {
                let (line, col) = line_col(&text, span.start);
                format!(":{line}:{col}")
            });
            let message = toml.message().trim_end();
            CliError::bad_input(e.kind(), format!("{file}{at}: {message}"))
                .hint("`y3 serve --print-config` prints every key with its default")
        }
        R::ConfigIo(io) => CliError::bad_input(
            e.kind(),
            format!("cannot read the config file {file}: {io}"),
        ),
        _ => return anyhow::Error::from(e).context(format!("config file {file}")),
    };
    if yaml {
        error
            .hint(format!(
                "{file} is YoMo's zipper YAML: name it .yaml or .yml to have it read as such"
            ))
            .into()
    } else {
        error.into()
    }
}

/// The 1-based line of TOML `text` that sets `field` (`section.key`): the first line
/// starting with `key` after the `[section]` header, before the next header.
fn key_line(text: &str, field: &str) -> Option<usize> {
    let (section, key) = field.split_once('.')?;
    let mut inside = false;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line.trim_matches(['[', ']']).trim() == section;
            continue;
        }
        let sets = line
            .strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with('='));
        if inside && sets {
            return Some(n + 1);
        }
    }
    None
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// A router that could not start, with what to try: another process holds a port, ...
fn start_error(e: y3_router::RouterError, file: Option<&std::path::Path>) -> anyhow::Error {
    use y3_router::RouterError as R;
    match &e {
        R::Config { field, .. } => {
            let text = file.and_then(|f| std::fs::read_to_string(f).ok());
            let at = file.zip(text.as_deref().and_then(|t| key_line(t, field)));
            let hint = match at {
                Some((file, line)) => format!(
                    "{field} is set at {}:{line} (a flag for it overrides the file)",
                    file.display()
                ),
                None => format!("set {field} in the config file (-c) or by its flag; `y3 serve --print-config` shows them all"),
            };
            CliError::bad_input(e.kind(), e.to_string())
                .hint(hint)
                .into()
        }
        R::Bind { what, addr, source } => {
            let flag = match *what {
                "tcp" => "--tcp",
                "quic" => "--quic",
                _ => "--metrics",
            };
            let hint = if source.kind() == std::io::ErrorKind::AddrInUse {
                format!("another process holds {addr} (another y3 serve? `ss -lntup | grep {}`): stop it, or pick another address with {flag} (\"\" turns the listener off)", addr.port())
            } else {
                format!("pick another address with {flag}")
            };
            CliError::new(e.kind(), crate::error::EXIT_RUNTIME, e.to_string())
                .hint(hint)
                .into()
        }
        _ => e.into(),
    }
}

/// SIGHUP (on Unix), registered before the router announces itself: a reload, never the
/// end of the process (its default action).
struct Hangup {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangup {
    /// Installs the handler now (inside the runtime).
    fn register() -> Hangup {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Hangup {
                signal: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        Hangup {}
    }

    /// Waits for the next SIGHUP (forever where there is none).
    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(signal) = &mut self.signal {
            if signal.recv().await.is_some() {
                return;
            }
        }
        std::future::pending::<()>().await;
    }
}

/// Reloads what a running router can take (SIGHUP): tokens, permissions, filters (the
/// router, `y3_router::Reloaded`) and the log level; the rest is logged as needing a
/// restart. A configuration that does not load is refused whole, logged, and the running
/// one kept.
fn reload(args: &ServeArgs, router: &RouterHandle, log: &crate::logging::LogHandle) {
    crate::notify::notify(crate::notify::State::Reloading);
    let loaded = args.config().and_then(|config| {
        crate::logging::parse_filter(&config.log.level, "[log] level")?;
        let reloaded = router.reload(&config)?;
        Ok((config, reloaded))
    });
    match loaded {
        Ok((config, reloaded)) => {
            let level = match log.set_level(&config.log.level) {
                Ok(true) => config.log.level.clone(),
                _ => "unchanged (RUST_LOG)".to_owned(),
            };
            tracing::info!(
                applied = reloaded.applied,
                needs_restart = ?reloaded.needs_restart,
                log_level = %level,
                "reloaded on SIGHUP"
            );
        }
        Err(e) => tracing::error!(
            error = %crate::error::message(&e),
            "reload refused: the configuration does not load; the running one is kept"
        ),
    }
    crate::notify::notify(crate::notify::State::Ready);
}

/// Logs a summary line at info every `every`: connections open, frames in and out, drops,
/// and how many of each since the last line.
async fn summaries(
    metrics: std::sync::Arc<y3_router::metrics::Metrics>,
    every: std::time::Duration,
) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    let (mut last_in, mut last_out, mut last_drops) = (0, 0, 0);
    loop {
        tick.tick().await;
        let stats = metrics.stats();
        let drops = stats.total_drops();
        tracing::info!(
            connections = stats.connections,
            frames_in = stats.frames_in,
            frames_out = stats.frames_out,
            dropped = drops,
            new_frames_in = stats.frames_in - last_in.min(stats.frames_in),
            new_frames_out = stats.frames_out - last_out.min(stats.frames_out),
            new_dropped = drops - last_drops.min(drops),
            "summary"
        );
        (last_in, last_out, last_drops) = (stats.frames_in, stats.frames_out, drops);
    }
}

/// Ctrl-C (or SIGTERM on Unix), registered before the router announces itself: a signal sent
/// right after the "listening" line must drain the router, not kill the process.
pub(crate) struct StopSignal {
    #[cfg(unix)]
    signals: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl StopSignal {
    /// Installs the handlers now (inside the runtime).
    pub(crate) fn register() -> StopSignal {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let signals = signal(SignalKind::interrupt())
                .and_then(|int| Ok((int, signal(SignalKind::terminate())?)));
            StopSignal {
                signals: signals.ok(),
            }
        }
        #[cfg(not(unix))]
        StopSignal {}
    }

    /// Waits for the first signal.
    pub(crate) async fn wait(self) {
        #[cfg(unix)]
        if let Some((mut int, mut term)) = self.signals {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Runs `y3 serve`.
///
/// # Errors
/// Configuration and bind errors, and a stdout that cannot be written: the router does not
/// run unannounced (nobody would learn its addresses and certificate), and once running, it
/// still drains before the error is returned.
pub fn run(args: &ServeArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.print_config {
        // Each key under its doc comment (`y3_router::config_reference`).
        let config = args.config_without_env()?;
        write!(
            out,
            "{}",
            y3_router::config_reference::commented_toml(&config)
        )?;
        out.flush()?;
        return Ok(());
    }
    let config = args.config()?;
    y3_router::status::set_git_commit(env!("Y3_GIT_COMMIT"));
    let log = crate::logging::init(&config.log.level, config.log.format)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(crate::memory::on_park)
        .build()?;
    crate::memory::spawn_reclaimer(runtime.handle().clone());
    runtime.block_on(async {
        let stop = StopSignal::register();
        let mut hangup = Hangup::register();
        let router = Router::start(config.clone())
            .await
            .map_err(|e| start_error(e, args.config.as_deref()))?;
        let show = |addr: Option<std::net::SocketAddr>| {
            addr.map_or_else(|| "off".to_owned(), |a| a.to_string())
        };
        writeln!(
            out,
            "y3 router listening: tcp {}{} quic {} metrics {}",
            show(router.tcp_addr()),
            if config.listen.tcp_tls { " (tls)" } else { "" },
            show(router.quic_addr()),
            router
                .metrics_addr()
                .map_or_else(|| "off".to_owned(), |a| format!("http://{a}/metrics")),
        )?;
        let pin = fingerprint_hex(&router.identity().fingerprint());
        if router.identity().is_self_signed() {
            let written = &config.tls.dev_cert_out;
            let place = if written.as_os_str().is_empty() {
                String::new()
            } else {
                format!(", written to {}", written.display())
            };
            writeln!(
                out,
                "tls: self-signed dev certificate sha256 {pin}{place} (clients: --pin {pin})"
            )?;
        } else {
            writeln!(out, "tls: certificate sha256 {pin}")?;
        }
        if !config.tls.client_ca.as_os_str().is_empty() {
            writeln!(
                out,
                "tls: client certificates required, issued by {}",
                config.tls.client_ca.display()
            )?;
        }
        writeln!(
            out,
            "policy {}, queue {} MiB/subscriber, token {}; Ctrl-C to stop, SIGHUP to reload",
            config.queue.policy.name(),
            config.queue.max_bytes >> 20,
            if config.auth.has_token() { "on" } else { "off" }
        )?;
        out.flush()?;
        if let Some(path) = &args.ready_file {
            let ready = Ready::of(&router, &config, args.config.as_deref());
            if let Err(e) = ready.write_atomic(path) {
                router.shutdown().await;
                return Err(anyhow::Error::from(e)
                    .context(format!("writing the ready file {}", path.display())));
            }
        }
        crate::notify::notify(crate::notify::State::Ready);
        let summary = (config.log.summary_secs > 0).then(|| {
            let every = std::time::Duration::from_secs(config.log.summary_secs);
            tokio::spawn(summaries(router.metrics_handle(), every))
        });
        let stop = stop.wait();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => break,
                () = hangup.recv() => reload(args, &router, &log),
            }
        }
        crate::notify::notify(crate::notify::State::Stopping);
        if let Some(summary) = summary {
            summary.abort();
        }
        // From here the drain happens whatever stdout does; its first error is returned.
        let draining = writeln!(out, "draining...").and_then(|()| out.flush());
        let metrics = router.metrics_handle();
        let stats = router.shutdown().await;
        if let Some(path) = &args.final_metrics {
            std::fs::write(path, metrics.encode())
                .with_context(|| format!("writing the final metrics to {}", path.display()))?;
        }
        if let Some(path) = &args.ready_file {
            let _ = std::fs::remove_file(path);
        }
        draining?;
        writeln!(
            out,
            "stopped: {} frames in, {} out, {} dropped, {} unaccounted",
            stats.frames_in,
            stats.frames_out,
            stats.total_drops(),
            stats.unaccounted()
        )?;
        out.flush()?;
        anyhow::Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    fn parse(args: &[&str]) -> ServeArgs {
        Serve::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .unwrap()
            .args
    }

    /// `-c` takes YoMo's zipper YAML by its extension; flags still override what it says.
    #[test]
    fn a_field_is_found_on_its_line() {
        let text = "[auth]\ntoken = \"x\"\n[listen]\n# tcp = no\ntcp_tls = true\ntcp = \"nope\"\n";
        assert_eq!(key_line(text, "listen.tcp"), Some(6));
        assert_eq!(key_line(text, "auth.token"), Some(2));
        assert_eq!(key_line(text, "listen.quic"), None);
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }

    #[test]
    fn dash_c_reads_yomo_yaml_and_flags_override_it() {
        let dir = std::env::temp_dir().join(format!("y3-serve-yaml-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let yaml = dir.join("zipper.yml");
        std::fs::write(
            &yaml,
            "name: z\nhost: 127.0.0.1\nport: 9100\nauth:\n  type: token\n  token: t\n",
        )
        .unwrap();
        let yaml_arg = yaml.to_str().unwrap();
        let config = parse(&["-c", yaml_arg]).config_without_env().unwrap();
        assert_eq!(config.mesh.name, "z");
        assert_eq!(config.listen.quic, "127.0.0.1:9100");
        assert_eq!(
            (config.listen.tcp.as_str(), config.auth.token.as_str()),
            ("", "t")
        );
        let config = parse(&["--config", yaml_arg, "--tcp", "127.0.0.1:0", "--token", "u"])
            .config_without_env()
            .unwrap();
        assert_eq!(
            (config.listen.tcp.as_str(), config.auth.token.as_str()),
            ("127.0.0.1:0", "u")
        );

        // The same text under another name is y3's TOML, and not valid TOML.
        let toml = dir.join("zipper.conf");
        std::fs::copy(&yaml, &toml).unwrap();
        let err = parse(&["-c", toml.to_str().unwrap()])
            .config_without_env()
            .unwrap_err();
        assert_eq!(crate::error::classify(&err).0, "config_toml");
        let text = format!("{err:#}");
        assert!(text.contains("zipper.conf:1:"), "{text}");
        let hint = err.downcast_ref::<CliError>().unwrap().hint.clone();
        assert!(
            hint.contains("zipper.conf is YoMo's zipper YAML: name it .yaml"),
            "{hint}"
        );
        // A key y3 does not have: refused with its kind, exit status 2.
        std::fs::write(&yaml, "name: z\nhost: 127.0.0.1\nport: 1\nbridge: {}\n").unwrap();
        let err = parse(&["-c", yaml_arg]).config_without_env().unwrap_err();
        assert_eq!(crate::error::classify(&err), ("yaml_unsupported", 2));
        assert!(
            format!("{err:#}").contains("zipper.yml: bridge: "),
            "{err:#}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
