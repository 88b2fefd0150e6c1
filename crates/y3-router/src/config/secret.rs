//! Reading a secret (a token, a password, an nkey) from its file: the one way every
//! `*_file` setting of the config is read.

use std::path::Path;

use crate::error::RouterError;

/// Reads the secret of config field `field` from `path`: the file's text without
/// surrounding whitespace. A file other users can read is warned about (unix); an
/// unreadable file is [`RouterError::Secret`], an empty one [`RouterError::Config`].
pub(crate) fn read_secret(field: &'static str, path: &Path) -> Result<String, RouterError> {
    let text = std::fs::read_to_string(path).map_err(|source| RouterError::Secret {
        field,
        path: path.to_owned(),
        source,
    })?;
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                field,
                path = %path.display(),
                "the secret file can be read by other users (chmod 600 it)"
            );
        }
    }
    let secret = text.trim();
    if secret.is_empty() {
        return Err(RouterError::Config {
            field,
            problem: "the secret file is empty",
        });
    }
    Ok(secret.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimmed_and_never_empty() {
        let dir = std::env::temp_dir().join(format!("y3-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "  s3cret \n").unwrap();
        assert_eq!(read_secret("auth.token_file", &file).unwrap(), "s3cret");
        std::fs::write(&file, " \n").unwrap();
        assert!(matches!(
            read_secret("auth.token_file", &file),
            Err(RouterError::Config {
                field: "auth.token_file",
                ..
            })
        ));
        let missing = dir.join("missing");
        assert!(matches!(
            read_secret("federation.nkey_file", &missing),
            Err(RouterError::Secret {
                field: "federation.nkey_file",
                ..
            })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
