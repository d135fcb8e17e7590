//! The basic check of a `roots/list` answer before it leaves: every root is a `file://` URI.
//!
//! Deeper boundary checks (normalisation inside allowed directories, `..` and symlink escapes)
//! are not done here.

use serde_json::Value;

use crate::error::AnswerError;

/// Checks a `ListRootsResult`: a `roots` array whose entries have a `uri` starting `file://`.
pub(crate) fn check_roots_answer(answer: &str) -> Result<(), AnswerError> {
    let mismatch = |field: String, reason| Err(AnswerError::Mismatch { field, reason });
    let answer: Value = serde_json::from_str(answer).map_err(|_| AnswerError::NotObject)?;
    let Some(roots) = answer.get("roots").and_then(Value::as_array) else {
        return mismatch("roots".into(), "must be an array");
    };
    for (i, root) in roots.iter().enumerate() {
        let uri = root.get("uri").and_then(Value::as_str).unwrap_or_default();
        if !uri.starts_with("file://") {
            return mismatch(format!("roots[{i}].uri"), "must be a file:// URI");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_file_uris_pass() {
        assert!(check_roots_answer(r#"{"roots":[]}"#).is_ok());
        assert!(check_roots_answer(r#"{"roots":[{"uri":"file:///a","name":"a"}]}"#).is_ok());
        let field = |a: &str| match check_roots_answer(a) {
            Err(AnswerError::Mismatch { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(r#"{"roots":[{"uri":"file:///a"},{"uri":"https://x"}]}"#), "roots[1].uri");
        assert_eq!(field(r#"{"roots":[{"name":"no uri"}]}"#), "roots[0].uri");
        assert_eq!(field(r#"{"root":[]}"#), "roots");
    }
}
