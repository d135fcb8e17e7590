//! Roots before they leave: each `uri` is a `file://` URI on this host whose path, decoded and
//! normalised, has no `..` segment and lies inside one of the allowed directories (when the
//! host set any). Lexical only: symlinks are resolved by the host, which may touch the file
//! system (`Host::set_roots`).

use serde_json::Value;

use crate::error::AnswerError;

/// Checks a `ListRootsResult`: a `roots` array whose entries have a `uri` that passes
/// [`file_uri_path`] and lies inside one of `allowed` (absolute, normalised paths; empty:
/// anywhere).
pub(crate) fn check_roots_answer(answer: &str, allowed: &[String]) -> Result<(), AnswerError> {
    for_each_root(answer, |i, uri| {
        let path = file_uri_path(uri).map_err(|reason| mismatch(i, reason))?;
        if !allowed.is_empty() && !allowed.iter().any(|dir| inside(&path, dir)) {
            return Err(mismatch(i, "outside the allowed directories"));
        }
        Ok(())
    })
}

/// Runs `f` on each root's index and `uri` (`""` when missing), after the shape checks.
pub(crate) fn for_each_root(
    answer: &str,
    mut f: impl FnMut(usize, &str) -> Result<(), AnswerError>,
) -> Result<(), AnswerError> {
    let answer: Value = serde_json::from_str(answer).map_err(|_| AnswerError::NotObject)?;
    let Some(roots) = answer.get("roots").and_then(Value::as_array) else {
        return Err(AnswerError::Mismatch { field: "roots".into(), reason: "must be an array" });
    };
    for (i, root) in roots.iter().enumerate() {
        f(i, root.get("uri").and_then(Value::as_str).unwrap_or_default())?;
    }
    Ok(())
}

pub(crate) fn mismatch(i: usize, reason: &'static str) -> AnswerError {
    AnswerError::Mismatch { field: format!("roots[{i}].uri"), reason }
}

/// The absolute path of a `file://` URI on this host (`file:///p` or `file://localhost/p`),
/// percent-decoded, with `.` and empty segments dropped. A `..` segment (also when encoded as
/// `%2e%2e`) is refused outright rather than resolved: a root names a place, it does not
/// navigate.
pub(crate) fn file_uri_path(uri: &str) -> Result<String, &'static str> {
    let rest = uri.strip_prefix("file://").ok_or("must be a file:// URI")?;
    let Some(slash) = rest.find('/') else { return Err("must have an absolute path") };
    let (authority, path) = rest.split_at(slash);
    if !(authority.is_empty() || authority.eq_ignore_ascii_case("localhost")) {
        return Err("must be on this host (file:///...)");
    }
    if path.contains(['?', '#']) {
        return Err("must not have a query or fragment");
    }
    let decoded = crate::proto::percent::decode(path).ok_or("bad percent-encoding")?;
    normalise(&decoded)
}

/// An absolute path with `.` and empty segments dropped; `..`, NUL and backslashes refused.
pub(crate) fn normalise(path: &str) -> Result<String, &'static str> {
    if !path.starts_with('/') {
        return Err("must be an absolute path");
    }
    if path.contains(['\0', '\\']) {
        return Err("must not contain NUL or backslash");
    }
    let mut out = String::with_capacity(path.len());
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err("must not contain `..`"),
            s => {
                out.push('/');
                out.push_str(s);
            }
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

/// Whether normalised `path` is `dir` or below it (`/a/bc` is not below `/a/b`).
pub(crate) fn inside(path: &str, dir: &str) -> bool {
    dir == "/" || path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(r: Result<(), AnswerError>) -> (String, &'static str) {
        match r {
            Err(AnswerError::Mismatch { field, reason }) => (field, reason),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_file_uris_pass() {
        assert!(check_roots_answer(r#"{"roots":[]}"#, &[]).is_ok());
        assert!(check_roots_answer(r#"{"roots":[{"uri":"file:///a","name":"a"}]}"#, &[]).is_ok());
        let check = |a: &str| field(check_roots_answer(a, &[])).0;
        assert_eq!(check(r#"{"roots":[{"uri":"file:///a"},{"uri":"https://x"}]}"#), "roots[1].uri");
        assert_eq!(check(r#"{"roots":[{"name":"no uri"}]}"#), "roots[0].uri");
        assert_eq!(check(r#"{"root":[]}"#), "roots");
    }

    #[test]
    fn escapes_are_refused() {
        let allowed = vec!["/srv/work".to_owned(), "/home/u/proj".to_owned()];
        let check = |uri: &str| {
            check_roots_answer(&format!(r#"{{"roots":[{{"uri":"{uri}"}}]}}"#), &allowed)
        };
        assert!(check("file:///srv/work").is_ok());
        assert!(check("file:///srv/work/a/./b/").is_ok());
        assert!(check("file://localhost/home/u/proj/x").is_ok());
        assert!(check("file:///home/u/proj/caf%C3%A9").is_ok());
        for (uri, reason) in [
            ("file:///srv/work/../etc", "must not contain `..`"),
            ("file:///srv/work/%2e%2e/etc", "must not contain `..`"),
            ("file:///srv/work/%2E%2E%2Fetc", "must not contain `..`"),
            ("file:///srv/workshop", "outside the allowed directories"),
            ("file:///etc/passwd", "outside the allowed directories"),
            ("file:///", "outside the allowed directories"),
            ("file://evil.example/srv/work", "must be on this host (file:///...)"),
            ("file:///srv/work/a%00b", "must not contain NUL or backslash"),
            ("file:///srv/work/a\\\\..\\\\b", "must not contain NUL or backslash"),
            ("file:///srv/work?x=1", "must not have a query or fragment"),
            ("file:///srv/work/%zz", "bad percent-encoding"),
            ("file://", "must have an absolute path"),
        ] {
            assert_eq!(field(check(uri)), ("roots[0].uri".into(), reason), "{uri}");
        }
        // Without allowed directories, anything lexically sound passes.
        let anywhere = check_roots_answer(r#"{"roots":[{"uri":"file:///etc"}]}"#, &[]);
        assert!(anywhere.is_ok());
    }

    #[test]
    fn inside_is_by_segment() {
        assert!(inside("/a/b", "/a/b") && inside("/a/b/c", "/a/b") && inside("/x", "/"));
        assert!(!inside("/a/bc", "/a/b") && !inside("/a", "/a/b"));
    }
}
