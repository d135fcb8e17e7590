//! What changed between two listings of one catalog, by id and content hash.
//!
//! A host re-injects only changed definitions into its model's context, so the diff names
//! exactly the ids that were added, removed or whose canonical content changed, and nothing
//! else. A renamed item is a removal plus an addition: nothing on the wire says two names are
//! the same tool. Duplicate ids never reach here: [`Catalog`] already kept the last of each
//! (see [`super::listing`]).

use std::fmt;

use super::listing::{Catalog, CatalogKind};

/// The ids that differ between an old and a new catalog, each list sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CatalogDiff {
    pub(crate) added: Vec<Box<str>>,
    pub(crate) removed: Vec<Box<str>>,
    pub(crate) changed: Vec<Box<str>>,
}

impl CatalogDiff {
    /// True when the two catalogs have the same content.
    pub(crate) fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// The two catalogs are of different kinds, so comparing them means nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KindMismatch {
    pub(crate) old: CatalogKind,
    pub(crate) new: CatalogKind,
}

impl fmt::Display for KindMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot diff a {} catalog against a {} one", self.old.method(), self.new.method())
    }
}

impl std::error::Error for KindMismatch {}

/// Compares `old` with `new` in one merge walk over their sorted entries.
pub(crate) fn diff(old: &Catalog, new: &Catalog) -> Result<CatalogDiff, KindMismatch> {
    if old.kind() != new.kind() {
        return Err(KindMismatch { old: old.kind(), new: new.kind() });
    }
    let mut out = CatalogDiff::default();
    if old.hash() == new.hash() {
        return Ok(out);
    }
    let (mut a, mut b) = (old.entries().iter().peekable(), new.entries().iter().peekable());
    loop {
        match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(o), None) => {
                out.removed.push(o.id.clone());
                a.next();
            }
            (None, Some(n)) => {
                out.added.push(n.id.clone());
                b.next();
            }
            (Some(o), Some(n)) => match o.id.cmp(&n.id) {
                std::cmp::Ordering::Less => {
                    out.removed.push(o.id.clone());
                    a.next();
                }
                std::cmp::Ordering::Greater => {
                    out.added.push(n.id.clone());
                    b.next();
                }
                std::cmp::Ordering::Equal => {
                    if o.hash != n.hash {
                        out.changed.push(n.id.clone());
                    }
                    a.next();
                    b.next();
                }
            },
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::listing::parse_page;
    use super::*;

    fn tools(items: &str) -> Catalog {
        let page =
            parse_page(CatalogKind::Tools, &format!(r#"{{"tools":[{items}]}}"#)).expect("page");
        Catalog::from_items(CatalogKind::Tools, &page.items)
    }

    fn names(v: &[Box<str>]) -> Vec<&str> {
        v.iter().map(AsRef::as_ref).collect()
    }

    #[test]
    fn identical_catalogs_in_any_order_have_no_diff() {
        let old = tools(r#"{"name":"a","description":"x"},{"name":"b"}"#);
        let new = tools(r#"{"name":"b"},{"description":"x","name":"a"}"#);
        assert!(diff(&old, &new).expect("same kind").is_empty());
    }

    #[test]
    fn names_added_removed_and_changed_each_sorted() {
        let old = tools(
            r#"{"name":"keep"},{"name":"gone2"},{"name":"edit","description":"v1"},
               {"name":"gone1"},{"name":"edit2","inputSchema":{"type":"object"}}"#,
        );
        let new = tools(
            r#"{"name":"new2"},{"name":"keep"},{"name":"edit","description":"v2"},{"name":"new1"},
               {"name":"edit2","inputSchema":{"type":"object","required":["x"]}}"#,
        );
        let d = diff(&old, &new).expect("same kind");
        assert_eq!(names(&d.added), ["new1", "new2"]);
        assert_eq!(names(&d.removed), ["gone1", "gone2"]);
        assert_eq!(names(&d.changed), ["edit", "edit2"]);
    }

    #[test]
    fn a_rename_is_a_removal_and_an_addition() {
        let old = tools(r#"{"name":"fetch","description":"Fetch a URL"}"#);
        let new = tools(r#"{"name":"fetch_url","description":"Fetch a URL"}"#);
        let d = diff(&old, &new).expect("same kind");
        assert_eq!(names(&d.added), ["fetch_url"]);
        assert_eq!(names(&d.removed), ["fetch"]);
        assert!(d.changed.is_empty());
    }

    #[test]
    fn empty_catalogs() {
        let empty = tools("");
        let some = tools(r#"{"name":"a"},{"name":"b"}"#);
        assert!(diff(&empty, &empty).expect("same kind").is_empty());
        let grown = diff(&empty, &some).expect("same kind");
        assert_eq!(names(&grown.added), ["a", "b"]);
        assert!(grown.removed.is_empty() && grown.changed.is_empty());
        let emptied = diff(&some, &empty).expect("same kind");
        assert_eq!(names(&emptied.removed), ["a", "b"]);
        assert!(emptied.added.is_empty() && emptied.changed.is_empty());
    }

    #[test]
    fn a_duplicate_in_the_new_listing_is_judged_by_its_last_definition() {
        let old = tools(r#"{"name":"a","v":1},{"name":"b"}"#);
        // "a" twice: the last one equals the old definition, so nothing changed.
        let same = tools(r#"{"name":"a","v":9},{"name":"b"},{"name":"a","v":1}"#);
        assert!(diff(&old, &same).expect("same kind").is_empty());
        // The last one differs: "a" changed, and is named once.
        let edited = tools(r#"{"name":"a","v":1},{"name":"b"},{"name":"a","v":2}"#);
        assert_eq!(names(&diff(&old, &edited).expect("same kind").changed), ["a"]);
    }

    #[test]
    fn catalogs_of_different_kinds_are_refused() {
        let t = tools("");
        let p = Catalog::from_items(CatalogKind::Prompts, []);
        let err = diff(&t, &p).expect_err("kinds differ");
        assert_eq!(err, KindMismatch { old: CatalogKind::Tools, new: CatalogKind::Prompts });
        assert_eq!(err.to_string(), "cannot diff a tools/list catalog against a prompts/list one");
    }
}
