//! [`AssertionFile`]: assertions read from a file each time the OAuth flow asks, the way
//! workload identity tokens are handed to a process (a Kubernetes projected service account
//! token, a CI job's OIDC token file) and rotated under it.

use std::fmt;
use std::io::Read;
use std::path::PathBuf;

use crate::auth::oauth::{Assertion, AssertionError, AssertionProvider, AssertionRequest};

/// The largest assertion file read; a bigger one is refused ([`AssertionError::Io`] with
/// `InvalidData`).
const MAX_ASSERTION_BYTES: u64 = 64 * 1024;

/// An [`AssertionProvider`] that reads the assertion from a file when the flow asks (on the
/// first grant, when the one held nears its expiry, after a refusal), so a token file
/// rotated by the platform is picked up. Surrounding whitespace is trimmed.
///
/// The read is a small local file read on the thread that polls the host.
#[derive(Clone, PartialEq, Eq)]
pub struct AssertionFile(pub PathBuf);

impl AssertionFile {
    /// Reads the assertion from `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self(path.into())
    }
}

impl fmt::Debug for AssertionFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AssertionFile").field(&self.0).finish()
    }
}

impl AssertionProvider for AssertionFile {
    fn assertion(&mut self, _: &AssertionRequest<'_>) -> Result<Assertion, AssertionError> {
        let file = std::fs::File::open(&self.0).map_err(|e| AssertionError::Io(e.kind()))?;
        let mut text = String::new();
        file.take(MAX_ASSERTION_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| AssertionError::Io(e.kind()))?;
        if text.len() as u64 > MAX_ASSERTION_BYTES {
            return Err(AssertionError::Io(std::io::ErrorKind::InvalidData));
        }
        Ok(Assertion::new(text.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::oauth::AssertionKind;

    #[test]
    fn reads_the_file_each_time_and_types_its_failures() {
        let dir = std::env::temp_dir().join(format!("mcpoll-assertion-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        let request = AssertionRequest {
            kind: AssertionKind::JwtBearer,
            audience: "https://as.test",
            resource: "https://mcp.test/mcp",
            renew: false,
        };
        let mut p = AssertionFile::new(&path);
        assert_eq!(p.assertion(&request), Err(AssertionError::Io(std::io::ErrorKind::NotFound)));
        std::fs::write(&path, "first\n").unwrap();
        assert_eq!(p.assertion(&request).unwrap().value.expose(), "first");
        // Rotated under the process: the next ask sees the new one.
        std::fs::write(&path, "  second ").unwrap();
        assert_eq!(p.assertion(&request).unwrap().value.expose(), "second");
        std::fs::write(&path, vec![b'a'; MAX_ASSERTION_BYTES as usize + 1]).unwrap();
        assert_eq!(p.assertion(&request), Err(AssertionError::Io(std::io::ErrorKind::InvalidData)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
