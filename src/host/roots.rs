//! Roots from directories: [`Host::set_root_dirs`] builds a roots list and its boundary from
//! paths (the checks themselves are the core's, [`crate::client::roots`]).

use std::path::Path;
use std::time::Instant;

use serde_json::value::RawValue;

use crate::client::roots::check_resolved;
use crate::client::ServerId;
use crate::engine::answer_checks::roots::mismatch;
use crate::engine::{RootsBoundary, RootsBoundaryError};
use crate::error::AnswerError;

use super::Host;

impl Host {
    /// Offers exactly `dirs` as the server's roots: the boundary becomes those directories
    /// ([`set_roots_boundary`](Self::set_roots_boundary)) and the roots list names each one as
    /// a `file://` URI ([`set_roots`](Self::set_roots)), so every check of those two applies:
    /// an absolute path without `..`, that exists, symlinks resolved inside. The server must
    /// be configured to answer roots (`Config::answers.roots`). What the CLI's `--root` and a
    /// configuration file's `mcpoll.roots` go through. No directory offers no roots and keeps
    /// the boundary as it was.
    ///
    /// # Errors
    ///
    /// [`AnswerError::Mismatch`] naming the first directory (`roots[i].uri`) that fails a
    /// check; nothing is changed then.
    pub fn set_root_dirs<P: AsRef<Path>>(
        &mut self,
        server: ServerId,
        dirs: &[P],
    ) -> Result<(), AnswerError> {
        if dirs.is_empty() {
            // No roots now; the boundary stays what it was (an empty one is none: any
            // directory a later roots list named passed its check).
            let none = RawValue::from_string(r#"{"roots":[]}"#.to_owned())
                .map_err(|_| AnswerError::NotObject)?;
            self.client.set_roots(Instant::now(), server, &none)?;
            self.flush_unflushed(Instant::now());
            return Ok(());
        }
        let (boundary, list) = roots_of_dirs(dirs)?;
        self.client.set_roots_boundary(server, boundary)?;
        self.client.set_roots(Instant::now(), server, &list)?;
        self.flush_unflushed(Instant::now());
        Ok(())
    }
}

/// The boundary and the roots list `dirs` make, every check of [`Host::set_root_dirs`] done:
/// worked out before any server is touched (a configuration file's roots are checked before
/// its server starts). `dirs` is not empty.
pub(super) fn roots_of_dirs<P: AsRef<Path>>(
    dirs: &[P],
) -> Result<(RootsBoundary, Box<RawValue>), AnswerError> {
    let mut texts = Vec::with_capacity(dirs.len());
    for (i, dir) in dirs.iter().enumerate() {
        let text = dir.as_ref().to_str().ok_or_else(|| mismatch(i, "must be UTF-8"))?;
        texts.push(text);
    }
    // One directory at a time, so the error names the one at fault.
    for (i, text) in texts.iter().enumerate() {
        RootsBoundary::new([text]).map_err(|e| match e {
            RootsBoundaryError::BadDirectory { reason, .. } => mismatch(i, reason),
        })?;
    }
    let boundary = RootsBoundary::new(&texts).map_err(|_| AnswerError::NotObject)?;
    let roots: Vec<serde_json::Value> = texts
        .iter()
        .map(|dir| {
            let mut uri = String::from("file://");
            percent_encode_path(dir, &mut uri);
            let name = dir.rsplit('/').find(|s| !s.is_empty()).unwrap_or("/");
            serde_json::json!({"uri": uri, "name": name})
        })
        .collect();
    let list = serde_json::json!({ "roots": roots }).to_string();
    let list = RawValue::from_string(list).map_err(|_| AnswerError::NotObject)?;
    // Checked against the new boundary before anything changes.
    check_resolved(list.get(), &boundary)?;
    Ok((boundary, list))
}

/// Appends `path` percent-encoded for a `file://` URI: unreserved characters and `/` as they
/// are, every other byte as `%XX`.
fn percent_encode_path(path: &str, out: &mut String) {
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}
