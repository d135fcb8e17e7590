//! The host side of roots: what the engine cannot check without the file system. A root must
//! exist and, symlinks resolved, still lie inside one of the allowed directories (also
//! resolved), so `/allowed/link -> /etc` is refused although it reads as inside.

use std::path::{Path, PathBuf};

use serde_json::value::RawValue;

use crate::engine::answer_checks::roots::{file_uri_path, for_each_root, mismatch};
use crate::engine::{
    Engine, RootsBoundary, RootsBoundaryError, ServerRequestId, ServerRequestKind,
};
use crate::error::AnswerError;

use super::{Host, ServerId};

impl Host {
    /// Bounds the roots offered to `server`; see [`Engine::set_roots_boundary`]. Symlinks are
    /// resolved when roots are set or answered.
    pub fn set_roots_boundary(
        &mut self,
        server: ServerId,
        boundary: RootsBoundary,
    ) -> Result<(), AnswerError> {
        let s = self.server_mut(server).ok_or(AnswerError::NotPending)?;
        s.engine.set_roots_boundary(boundary);
        Ok(())
    }

    /// Sets the roots offered to `server` (a `ListRootsResult`); see [`Engine::set_roots`].
    /// With a boundary set, every root must exist and resolve (symlinks followed) inside it.
    pub fn set_roots(&mut self, server: ServerId, roots: &RawValue) -> Result<(), AnswerError> {
        let s = self.server(server).ok_or(AnswerError::NotPending)?;
        check_resolved(roots.get(), s.engine.roots_boundary())?;
        self.respond(server, |e, now| e.set_roots(now, roots))
    }

    /// Offers exactly `dirs` as the server's roots: the boundary becomes those directories
    /// ([`set_roots_boundary`](Self::set_roots_boundary)) and the roots list names each one as
    /// a `file://` URI ([`set_roots`](Self::set_roots)), so every check of those two applies:
    /// an absolute path without `..`, that exists, symlinks resolved inside. The server must
    /// be configured to answer roots (`Config::answers.roots`). What the CLI's `--root` and a
    /// configuration file's `mcpoll.roots` go through.
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
        self.set_roots_boundary(server, boundary)?;
        self.set_roots(server, &list)
    }
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

/// [`check_resolved`] for an answer to a roots request (other answers pass).
pub(super) fn check_answer_resolved(
    engine: &Engine,
    request: ServerRequestId,
    answer: &RawValue,
) -> Result<(), AnswerError> {
    match engine.server_request_kind(request) {
        Some(ServerRequestKind::Roots) => check_resolved(answer.get(), engine.roots_boundary()),
        _ => Ok(()),
    }
}

/// Each root, resolved on this host, lies inside a resolved allowed directory. Without a
/// boundary there is nothing to escape from and the file system is not touched.
fn check_resolved(answer: &str, boundary: &RootsBoundary) -> Result<(), AnswerError> {
    let dirs: Vec<PathBuf> =
        boundary.dirs().map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.into())).collect();
    if dirs.is_empty() {
        return Ok(());
    }
    for_each_root(answer, |i, uri| {
        // Lexical faults are the engine's to report, with the same words.
        let Ok(path) = file_uri_path(uri) else { return Ok(()) };
        let real =
            std::fs::canonicalize(&path).map_err(|_| mismatch(i, "does not exist on this host"))?;
        if !dirs.iter().any(|d| real.starts_with(d)) {
            return Err(mismatch(
                i,
                "resolves (through a symlink) outside the allowed directories",
            ));
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_out_of_the_boundary_is_refused() {
        let base = std::env::temp_dir().join(format!("mcpoll-roots-{}", std::process::id()));
        let allowed = base.join("allowed");
        let outside = base.join("outside");
        std::fs::create_dir_all(allowed.join("real")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let link = allowed.join("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let boundary = RootsBoundary::new([allowed.to_str().unwrap()]).unwrap();
        let answer =
            |p: &std::path::Path| format!(r#"{{"roots":[{{"uri":"file://{}"}}]}}"#, p.display());
        assert!(check_resolved(&answer(&allowed.join("real")), &boundary).is_ok());
        let refused = |p: &std::path::Path| match check_resolved(&answer(p), &boundary) {
            Err(AnswerError::Mismatch { reason, .. }) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(refused(&link), "resolves (through a symlink) outside the allowed directories");
        assert_eq!(refused(&allowed.join("missing")), "does not exist on this host");
        // No boundary: nothing resolved, nothing refused here.
        assert!(check_resolved(&answer(&link), &RootsBoundary::default()).is_ok());
        let _ = std::fs::remove_dir_all(&base);
    }
}
