//! The host's roots: where they may point, the list itself once the host sets it, and
//! `notifications/roots/list_changed` when it changes.
//!
//! With a list set ([`Engine::set_roots`](super::Engine::set_roots)), the engine answers `roots/list` itself (legacy
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

use super::answer_checks::roots::{self as check, normalise};
use crate::error::AnswerError;

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

    pub(super) fn boundary(&self) -> &RootsBoundary {
        &self.boundary
    }

    /// A new boundary; a list set earlier that it refuses is dropped, so a narrowed boundary
    /// never lets old roots out. Returns whether a list was dropped.
    pub(super) fn set_boundary(&mut self, boundary: RootsBoundary) -> bool {
        self.boundary = boundary;
        if self.current.as_deref().is_some_and(|c| self.check(c).is_err()) {
            self.current = None;
            return true;
        }
        false
    }

    /// Drops the list set; returns whether there was one.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the core's boundary check
    pub(super) fn forget(&mut self) -> bool {
        self.current.take().is_some()
    }

    /// Sets the list (a `ListRootsResult`), checked like an answer and kept on one line (on
    /// stdio a raw line break would end the frame). `Ok(true)` when it differs from the list
    /// set before.
    pub(super) fn set(&mut self, roots: &str) -> Result<bool, AnswerError> {
        let text = roots.trim();
        if !text.starts_with('{') {
            return Err(AnswerError::NotObject);
        }
        self.check(text)?;
        let text = text.replace(['\n', '\r'], " ");
        if self.current.as_deref() == Some(text.as_str()) {
            return Ok(false);
        }
        self.current = Some(text);
        Ok(true)
    }
}
