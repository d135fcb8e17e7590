//! The host's roots: where they may point, the list itself once the host sets it, and
//! `notifications/roots/list_changed` when it changes.
//!
//! With a list set ([`Engine::set_roots`]), the engine answers `roots/list` itself (legacy
//! requests and modern input requests alike) and the host sees no `ServerRequest` for roots.
//! Without one, roots requests go to the host as before and its answer is checked the same way.
//!
//! # Tenants
//!
//! A boundary belongs to one engine, that is one server connection, and a connection serves one
//! tenant (`Config::cache_tenant`): one tenant's roots never reach another tenant's server. A
//! host that multiplexes principals over one connection must keep a boundary per principal;
//! this is the seam for that (`Roots` would be keyed by principal).

use std::fmt;
use std::time::Instant;

use serde_json::value::RawValue;

use super::answer_checks::roots::{self as check, normalise};
use super::outbound;
use super::Engine;
use crate::error::AnswerError;
use crate::proto::version::Era;

/// The directories the host's roots must lie in. Paths are absolute; they are normalised
/// lexically (`.` and repeated `/` dropped). Symlinks are not resolved here (the engine does no
/// I/O): [`Host::set_roots`](crate::Host::set_roots) resolves them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RootsBoundary {
    dirs: Vec<String>,
}

/// Why a directory cannot bound roots.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RootsBoundaryError {
    /// The directory is not an absolute path, or has a `..`, NUL or backslash.
    BadDirectory {
        /// The directory as given.
        dir: String,
        /// What is wrong.
        reason: &'static str,
    },
}

impl fmt::Display for RootsBoundaryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadDirectory { dir, reason } => write!(f, "allowed directory {dir:?}: {reason}"),
        }
    }
}

impl std::error::Error for RootsBoundaryError {}

impl RootsBoundary {
    /// Roots must lie in one of `dirs` (or be one of them).
    pub fn new<S: AsRef<str>>(
        dirs: impl IntoIterator<Item = S>,
    ) -> Result<Self, RootsBoundaryError> {
        let dirs = dirs
            .into_iter()
            .map(|d| {
                normalise(d.as_ref()).map_err(|reason| RootsBoundaryError::BadDirectory {
                    dir: d.as_ref().to_owned(),
                    reason,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { dirs })
    }

    /// The allowed directories, normalised.
    pub fn dirs(&self) -> impl Iterator<Item = &str> {
        self.dirs.iter().map(String::as_str)
    }
}

/// The engine's roots state.
#[derive(Debug, Default)]
pub(super) struct Roots {
    boundary: RootsBoundary,
    /// The `ListRootsResult` the host set, on one line.
    current: Option<String>,
}

impl Roots {
    /// The answer to a roots request, once the host set its roots.
    pub(super) fn current(&self) -> Option<&str> {
        self.current.as_deref()
    }

    /// Checks a `ListRootsResult` against the boundary (see `answer_checks::roots`).
    pub(super) fn check(&self, answer: &str) -> Result<(), AnswerError> {
        check::check_roots_answer(answer, &self.boundary.dirs)
    }
}

impl Engine {
    /// Bounds the roots the host offers: an answer to a roots request, and any list given to
    /// [`set_roots`](Self::set_roots), is refused when a root lies outside every directory. A
    /// list set earlier that the new boundary refuses is dropped (roots requests go to the host
    /// again), so a narrowed boundary never lets old roots out.
    pub fn set_roots_boundary(&mut self, boundary: RootsBoundary) {
        self.roots.boundary = boundary;
        if self.roots.current.as_deref().is_some_and(|c| self.roots.check(c).is_err()) {
            self.roots.current = None;
        }
    }

    /// The boundary set by [`set_roots_boundary`](Self::set_roots_boundary) (empty: roots may
    /// be anywhere lexically sound).
    pub fn roots_boundary(&self) -> &RootsBoundary {
        &self.roots.boundary
    }

    /// Sets the host's roots (a `ListRootsResult`: `{"roots":[{"uri":"file:///...",
    /// "name":..}]}`), checked like an answer; from now on the engine answers roots requests
    /// with it. When the list changed, the server speaks 2025-11-25 and the host declared
    /// `ServerRequestKinds::roots_list_changed`, `notifications/roots/list_changed` is sent
    /// (2026-07-28 has no such notification: a modern server asks for roots in each round).
    pub fn set_roots(&mut self, _now: Instant, roots: &RawValue) -> Result<(), AnswerError> {
        let text = roots.get().trim();
        if !text.starts_with('{') {
            return Err(AnswerError::NotObject);
        }
        self.roots.check(text)?;
        // One line: on stdio a raw line break would end the frame (see `answer`).
        let text = text.replace(['\n', '\r'], " ");
        if self.roots.current.as_deref() == Some(text.as_str()) {
            return Ok(());
        }
        self.roots.current = Some(text);
        let answers = self.config.answers;
        if answers.roots && answers.roots_list_changed && self.era() == Some(Era::Legacy) {
            self.push_control(outbound::Control::RootsChanged);
        }
        Ok(())
    }
}
