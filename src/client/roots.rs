//! Roots checked against the file system: a root must exist and, symlinks resolved, still lie
//! inside one of the allowed directories (also resolved), so `/allowed/link -> /etc` is
//! refused although it reads as inside. What the engine cannot check without the file system.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::value::RawValue;

use crate::engine::answer_checks::roots::{file_uri_path, for_each_root, mismatch};
use crate::engine::{Engine, RootsBoundary, ServerRequestId};
use crate::error::AnswerError;
use crate::proto::mcp::ServerRequestKind;

use super::{Client, ServerId};

impl Client {
    /// Bounds the roots offered to `server`, and to the principals' lanes on it (they serve
    /// the same files); see [`Engine::set_roots_boundary`]. Symlinks are resolved when roots
    /// are set or answered.
    pub fn set_roots_boundary(
        &mut self,
        server: ServerId,
        boundary: RootsBoundary,
    ) -> Result<(), AnswerError> {
        self.server(server).ok_or(AnswerError::NotPending)?;
        for lane in self.lanes.lanes_on(server) {
            // A lane gone by now has nothing to bound.
            let _ = self.bound_roots(lane, boundary.clone());
        }
        self.bound_roots(server, boundary)
    }

    fn bound_roots(
        &mut self,
        server: ServerId,
        boundary: RootsBoundary,
    ) -> Result<(), AnswerError> {
        let s = self.server_mut(server).ok_or(AnswerError::NotPending)?;
        s.engine.set_roots_boundary(boundary);
        // The engine drops a list set earlier that the new boundary refuses by its words; one
        // that reads as inside but resolves outside (a symlink) goes too, or the engine would
        // go on answering with it.
        let escapes =
            s.engine.roots().map(|current| check_resolved(current, s.engine.roots_boundary()));
        if escapes.is_some_and(|checked| checked.is_err()) {
            log::debug!("a roots list set earlier resolves outside the new boundary: dropped");
            s.engine.forget_roots();
        }
        Ok(())
    }

    /// Sets the roots offered to `server` (a `ListRootsResult`), and to the principals' lanes
    /// on it; see [`Engine::set_roots`]. With a boundary set, every root must exist and
    /// resolve (symlinks followed) inside it.
    pub fn set_roots(
        &mut self,
        now: Instant,
        server: ServerId,
        roots: &RawValue,
    ) -> Result<(), AnswerError> {
        let s = self.server(server).ok_or(AnswerError::NotPending)?;
        check_resolved(roots.get(), s.engine.roots_boundary())?;
        self.respond(now, server, |e, now| e.set_roots(now, roots))?;
        for lane in self.lanes.lanes_on(server) {
            // Its boundary is its server's: checked above. A lane gone by now is skipped.
            let _ = self.respond(now, lane, |e, now| e.set_roots(now, roots));
        }
        Ok(())
    }
}

/// [`check_resolved`] for an answer to a roots request (other answers pass).
pub(crate) fn check_answer_resolved(
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
pub(crate) fn check_resolved(answer: &str, boundary: &RootsBoundary) -> Result<(), AnswerError> {
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
