//! The router's state directory (`[state]`): what survives a restart.
//!
//! ```text
//!  <dir>/                     0700, made when missing
//!    quic-reset.secret        0600, 32 random bytes, written once (never replaced)
//!    dev-identity-<address>.pem  0600, the generated dev certificate and key of the router
//!                             listening on <address> (QUIC's, else TCP's), reused until 30
//!                             days before it expires, so that clients' pins survive restarts
//!    quic-peers-<address>     0600, the QUIC clients of the listener on <address>, kept
//!                             while it runs, read and removed by its successor
//!    mqtt-sessions-<listen>   0600, persistent MQTT sessions and retained messages, written
//!                             at a graceful stop, read and removed by the next start
//!                             (`mqtt/saved.rs`)
//! ```
//!
//! The QUIC listener derives its stateless-reset and connection-ID keys from the secret and
//! its bound address ([`ResetSecret`], `y3_transport::quic`): after a crash, the restarted
//! router answers the old connections' next packets with stateless resets and their
//! clients reconnect at once. Routers on one host may share the directory: each listener
//! address gets keys of its own. A router started from a `[state]` it cannot use (no home
//! directory, a read-only disk, a file readable by others) logs a warning and runs with a
//! fresh secret: its clients then fall back to their idle timeout after a crash. It never
//! fails to start for it.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use y3_transport::quic::{Recovery, ResetSecret};
use y3_transport::tls::{Identity, Kept};

use crate::config::StateConfig;
use crate::error::RouterError;

/// The secret's file in the state directory.
pub const SECRET_FILE: &str = "quic-reset.secret";

/// The state directory `config` names: its `dir`, else the first of `$STATE_DIRECTORY`
/// (systemd), `$XDG_STATE_HOME/y3`, `$HOME/.local/state/y3`; `None` without any.
pub fn dir(config: &StateConfig) -> Option<PathBuf> {
    if !config.dir.as_os_str().is_empty() {
        return Some(config.dir.clone());
    }
    default_dir(|name| std::env::var_os(name).filter(|v| !v.is_empty()))
}

fn default_dir(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    if let Some(dirs) = env("STATE_DIRECTORY") {
        // systemd lists one directory per StateDirectory= entry, colon-separated.
        let first = dirs.to_string_lossy().split(':').next().map(PathBuf::from);
        if let Some(first) = first.filter(|d| !d.as_os_str().is_empty()) {
            return Some(first);
        }
    }
    if let Some(state) = env("XDG_STATE_HOME") {
        return Some(PathBuf::from(state).join("y3"));
    }
    env("HOME").map(|home| PathBuf::from(home).join(".local/state/y3"))
}

/// The development certificate of a router without `[tls] cert`: the one kept in the state
/// directory for its listener address (QUIC's, else TCP's; `y3_transport::tls::
/// Identity::kept_self_signed`), or, without a usable directory, with `persist = false` or
/// on an ephemeral port (nothing to recognize it by next time), a fresh one for this run.
///
/// # Errors
/// [`RouterError::Transport`] only when no certificate can be generated at all.
pub(crate) fn dev_identity(
    config: &StateConfig,
    listener: Option<std::net::SocketAddr>,
) -> Result<Identity, RouterError> {
    let kept = match (config.persist, dir(config), listener) {
        (true, Some(dir), Some(addr)) if addr.port() != 0 => Some((dir, addr)),
        _ => None,
    };
    let Some((dir, addr)) = kept else {
        return Ok(Identity::self_signed()?);
    };
    match Identity::kept_self_signed(&dir, addr) {
        Ok((identity, kept)) => {
            tracing::info!(
                path = %y3_transport::tls::dev_identity_path(&dir, addr).display(),
                reused = kept == Kept::Reused,
                "dev certificate"
            );
            Ok(identity)
        }
        Err(e) => {
            tracing::warn!(
                dir = %dir.display(),
                error = %e,
                "cannot keep the dev certificate in the state directory: a new one for this run \
                 only; clients' pins break at the next restart"
            );
            Ok(Identity::self_signed()?)
        }
    }
}

/// What the QUIC listener keeps across restarts: the reset secret and,
/// when that is kept in the state directory, the directory for its peers file (the clients
/// a successor resets at once, `y3_transport::quic::Recovery`).
///
/// # Errors
/// [`RouterError::Transport`] only when the system random source fails.
pub(crate) fn recovery(config: &StateConfig) -> Result<Recovery, RouterError> {
    let (secret, kept) = secret_kept(config)?;
    Ok(Recovery {
        secret,
        peers_dir: kept,
    })
}

/// The QUIC reset secret and the directory it is kept in: the one kept in the state
/// directory (made on first use), or a fresh one (`None`) when `[state] persist = false` or
/// the directory cannot be used (logged).
fn secret_kept(config: &StateConfig) -> Result<(ResetSecret, Option<PathBuf>), RouterError> {
    if !config.persist {
        return Ok((ResetSecret::random()?, None));
    }
    let Some(dir) = dir(config) else {
        tracing::warn!(
            "no state directory ([state] dir, $STATE_DIRECTORY, $XDG_STATE_HOME, $HOME): a new \
             QUIC reset secret for this run only; after a crash, clients reconnect only once \
             their idle timeout passes"
        );
        return Ok((ResetSecret::random()?, None));
    };
    match load_or_create(&dir) {
        Ok(secret) => Ok((secret, Some(dir))),
        Err(e) => {
            tracing::warn!(
                dir = %dir.display(),
                error = %e,
                "state directory unusable: a new QUIC reset secret for this run only; after a \
                 crash, clients reconnect only once their idle timeout passes"
            );
            Ok((ResetSecret::random()?, None))
        }
    }
}

fn refuse(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, what.to_owned())
}

/// Reads `<dir>/quic-reset.secret`, or makes it: a fresh secret written to a file of its own
/// and linked into place only if no other router did so first (then theirs is read).
fn load_or_create(dir: &Path) -> io::Result<ResetSecret> {
    y3_transport::tls::private_dir(dir)?;
    let path = dir.join(SECRET_FILE);
    for _ in 0..3 {
        match read_reset_secret(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => return other,
        }
        let secret = ResetSecret::random().map_err(io::Error::other)?;
        let tmp = dir.join(format!(
            ".{SECRET_FILE}.{}.{:016x}.tmp",
            std::process::id(),
            fastrand_u64()
        ));
        let made = write_new(&tmp, secret.as_bytes()).and_then(|()| fs::hard_link(&tmp, &path));
        let _ = fs::remove_file(&tmp);
        match made {
            Ok(()) => {
                tracing::info!(path = %path.display(), "made the QUIC reset secret");
                return Ok(secret);
            }
            // Another router made it between our read and our link: read theirs.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("the secret file kept changing"))
}

/// A process-unique suffix for temporary names (not a secret).
fn fastrand_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

/// Writes `bytes` to the new file `path` (0600, `O_EXCL`), synced.
fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Reads the secret file: a plain file (not a link) readable by this user only, holding
/// exactly [`ResetSecret::LEN`] bytes.
fn read_reset_secret(path: &Path) -> io::Result<ResetSecret> {
    let meta = fs::symlink_metadata(path)?;
    if !meta.is_file() {
        return Err(refuse(
            "the secret is not a plain file (links are not followed)",
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(refuse(
                "the secret file is open to other users (want mode 0600)",
            ));
        }
    }
    let mut bytes = [0u8; ResetSecret::LEN];
    let mut file = fs::File::open(path)?;
    file.read_exact(&mut bytes)?;
    if file.read(&mut [0u8; 1])? != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the secret file is longer than a secret",
        ));
    }
    Ok(ResetSecret::from_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "y3-state-{name}-{}-{:x}",
            std::process::id(),
            fastrand_u64()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_default_directory_follows_systemd_then_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert_eq!(
            default_dir(env(&[
                ("STATE_DIRECTORY", "/var/lib/y3:/var/lib/other"),
                ("XDG_STATE_HOME", "/x"),
                ("HOME", "/h")
            ])),
            Some(PathBuf::from("/var/lib/y3"))
        );
        assert_eq!(
            default_dir(env(&[("XDG_STATE_HOME", "/x"), ("HOME", "/h")])),
            Some(PathBuf::from("/x/y3"))
        );
        assert_eq!(
            default_dir(env(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.local/state/y3"))
        );
        assert_eq!(default_dir(env(&[])), None);
    }

    #[test]
    fn the_secret_is_made_once_private_and_kept() {
        let dir = temp("keep").join("nested");
        let config = StateConfig {
            dir: dir.clone(),
            persist: true,
        };
        let first = recovery(&config).unwrap().secret;
        let second = recovery(&config).unwrap().secret;
        assert_eq!(first.as_bytes(), second.as_bytes());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir), 0o700);
            assert_eq!(mode(&dir.join(SECRET_FILE)), 0o600);
        }
        // Nothing left behind but the secret.
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [SECRET_FILE]);
        // persist = false: a new one each time, nothing read.
        let off = StateConfig {
            dir: dir.clone(),
            persist: false,
        };
        assert_ne!(recovery(&off).unwrap().secret.as_bytes(), first.as_bytes());
        fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }

    #[test]
    fn an_unusable_directory_or_file_gives_a_fresh_secret() {
        let base = temp("bad");
        fs::create_dir_all(&base).unwrap();
        // The "directory" is a file.
        let file = base.join("file");
        fs::write(&file, b"x").unwrap();
        let config = |dir: &Path| StateConfig {
            dir: dir.to_path_buf(),
            persist: true,
        };
        assert!(load_or_create(&file).is_err());
        let a = recovery(&config(&file)).unwrap().secret;
        let b = recovery(&config(&file)).unwrap().secret;
        assert_ne!(a.as_bytes(), b.as_bytes());
        // A secret file of the wrong length or open to others is not used.
        let dir = base.join("state");
        fs::create_dir_all(&dir).unwrap();
        write_new(&dir.join(SECRET_FILE), b"short").unwrap();
        assert_eq!(
            load_or_create(&dir).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::remove_file(dir.join(SECRET_FILE)).unwrap();
            write_new(&dir.join(SECRET_FILE), &[7; ResetSecret::LEN]).unwrap();
            assert_eq!(
                load_or_create(&dir).unwrap().as_bytes(),
                &[7; ResetSecret::LEN]
            );
            fs::set_permissions(dir.join(SECRET_FILE), fs::Permissions::from_mode(0o644)).unwrap();
            assert_eq!(
                load_or_create(&dir).unwrap_err().kind(),
                io::ErrorKind::PermissionDenied
            );
        }
        fs::remove_dir_all(&base).unwrap();
    }
}
