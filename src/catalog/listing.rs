//! One page of a list result as canonical items, and a whole catalog as a sorted digest.
//!
//! An item's identity is its `name` (tools, prompts), its `uri` (resources) or its
//! `uriTemplate` (resource templates), because that is what a later request names it by.
//! Within one listing an identity given twice keeps its **last** definition (counted in
//! `duplicates`): a paged walk that races a server-side change can see an item on two pages,
//! and the later page is the newer view. Failing the whole listing would take every other
//! tool away for one server slip.

use std::fmt;

use super::canonical::{self, keep_last_of_runs, CanonicalError, Value};
use super::hash::{ContentHash, StableHasher};
use super::hints::{CacheHints, TtlHint};

/// The four kinds of list the spec makes cacheable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum CatalogKind {
    Tools,
    Prompts,
    Resources,
    // The spec makes it cacheable and the store takes it; no host call lists it yet.
    #[cfg_attr(not(test), allow(dead_code))]
    ResourceTemplates,
}

impl CatalogKind {
    /// The list method.
    pub(crate) fn method(self) -> &'static str {
        match self {
            CatalogKind::Tools => "tools/list",
            CatalogKind::Prompts => "prompts/list",
            CatalogKind::Resources => "resources/list",
            CatalogKind::ResourceTemplates => "resources/templates/list",
        }
    }

    /// The result member holding the items.
    pub(crate) fn items_member(self) -> &'static str {
        match self {
            CatalogKind::Tools => "tools",
            CatalogKind::Prompts => "prompts",
            CatalogKind::Resources => "resources",
            CatalogKind::ResourceTemplates => "resourceTemplates",
        }
    }

    /// The item member that identifies it.
    pub(crate) fn id_member(self) -> &'static str {
        match self {
            CatalogKind::Tools | CatalogKind::Prompts => "name",
            CatalogKind::Resources => "uri",
            CatalogKind::ResourceTemplates => "uriTemplate",
        }
    }
}

/// One list item: its identity, canonical JSON and the hash of that JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    id: Box<str>,
    json: Box<str>,
    hash: ContentHash,
}

impl Item {
    /// Canonicalises one item object of `kind`.
    #[cfg(test)]
    pub(crate) fn from_json(kind: CatalogKind, json: &str) -> Result<Self, ListingError> {
        let value = canonical::parse(json).map_err(ListingError::Json)?;
        Item::from_value(kind, &value, 0)
    }

    fn from_value(kind: CatalogKind, v: &Value<'_>, index: usize) -> Result<Self, ListingError> {
        if !matches!(v, Value::Object(_)) {
            return Err(ListingError::NotAnObject { index });
        }
        let id = v
            .get(kind.id_member())
            .and_then(Value::as_str)
            .ok_or(ListingError::MissingId { index, member: kind.id_member() })?;
        let json = v.to_canonical();
        let hash = ContentHash::of(json.as_bytes());
        Ok(Item { id: id.into(), json: json.into(), hash })
    }

    /// The identity (name, uri or uriTemplate).
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// The canonical JSON of the whole item.
    pub(crate) fn json(&self) -> &str {
        &self.json
    }

    /// The hash of [`Item::json`].
    #[cfg(any(test, feature = "schema"))]
    pub(crate) fn hash(&self) -> ContentHash {
        self.hash
    }

    /// Heap bytes held, for the store's byte cap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.id.len() + self.json.len()
    }
}

/// One page of a list result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedPage {
    /// Sorted by id, ids unique (last given wins).
    pub(crate) items: Vec<Item>,
    /// `nextCursor`; `Some("")` is a real cursor, only `None` ends the list.
    pub(crate) next_cursor: Option<Box<str>>,
    pub(crate) hints: CacheHints,
    /// Items dropped because a later item on the page had the same id.
    pub(crate) duplicates: u32,
}

impl ParsedPage {
    /// The page with the lifetime its era gives a missing or malformed `ttlMs`: a 2026-07-28
    /// result must carry one, so without it the page is stale at once (PROTOCOL.md §2.2);
    /// a 2025-11-25 result never does, and keeps the client's default lifetime.
    pub(crate) fn lifetime_in_era(mut self, modern: bool) -> Self {
        if modern && self.hints.ttl == TtlHint::Unspecified {
            self.hints.ttl = TtlHint::Millis(0);
        }
        self
    }

    /// The item with this id, by binary search.
    #[cfg(test)]
    pub(crate) fn item(&self, id: &str) -> Option<&Item> {
        find(&self.items, id)
    }
}

/// The item with this id in a slice sorted by id.
#[cfg(test)]
pub(crate) fn find<'a>(items: &'a [Item], id: &str) -> Option<&'a Item> {
    items.binary_search_by(|it| it.id().cmp(id)).ok().and_then(|i| items.get(i))
}

/// Parses the `result` object of a list response of `kind`.
pub(crate) fn parse_page(kind: CatalogKind, result_json: &str) -> Result<ParsedPage, ListingError> {
    let result = canonical::parse(result_json).map_err(ListingError::Json)?;
    let Some(Value::Array(raw_items)) = result.get(kind.items_member()) else {
        return Err(ListingError::MissingItems { member: kind.items_member() });
    };
    let next_cursor = match result.get("nextCursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(Box::from(s.as_ref())),
        Some(_) => return Err(ListingError::BadCursor),
    };
    let mut items = raw_items
        .iter()
        .enumerate()
        .map(|(i, v)| Item::from_value(kind, v, i))
        .collect::<Result<Vec<_>, _>>()?;
    let duplicates = sort_last_wins(&mut items);
    Ok(ParsedPage { items, next_cursor, hints: CacheHints::from_result(&result), duplicates })
}

/// Sorts by id and keeps the last of equal ids; returns how many were dropped.
fn sort_last_wins(items: &mut Vec<Item>) -> u32 {
    items.sort_by(|a, b| a.id.cmp(&b.id)); // stable: equal ids keep their given order
    let before = items.len();
    keep_last_of_runs(items, |a, b| a.id == b.id);
    u32::try_from(before - items.len()).unwrap_or(u32::MAX)
}

/// A whole catalog (all pages of one list) reduced to what diffs and change detection need:
/// each identity with its content hash, sorted, plus the hash of the canonical catalog.
///
/// The canonical catalog text is `[` + the items' canonical JSON in id order, joined by `,`,
/// + `]`; [`Catalog::hash`] is the [`ContentHash`] of that text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Catalog {
    kind: CatalogKind,
    entries: Vec<Entry>,
    hash: ContentHash,
    duplicates: u32,
}

/// One catalog item's identity and content hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) id: Box<str>,
    pub(crate) hash: ContentHash,
}

impl Catalog {
    /// Builds the digest from every page's items, in listing order (pages in cursor order);
    /// an id seen twice keeps its last item.
    pub(crate) fn from_items<'a>(
        kind: CatalogKind,
        items: impl IntoIterator<Item = &'a Item>,
    ) -> Self {
        let (unique, duplicates) = unique_last_wins(items);
        let mut h = StableHasher::new();
        h.write(b"[");
        for (i, it) in unique.iter().enumerate() {
            if i > 0 {
                h.write(b",");
            }
            h.write(it.json.as_bytes());
        }
        h.write(b"]");
        let entries = unique.iter().map(|it| Entry { id: it.id.clone(), hash: it.hash }).collect();
        Catalog { kind, entries, hash: h.finish(), duplicates }
    }

    pub(crate) fn kind(&self) -> CatalogKind {
        self.kind
    }

    /// Entries sorted by id, ids unique.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The hash of the canonical catalog text.
    pub(crate) fn hash(&self) -> ContentHash {
        self.hash
    }

    /// Items dropped because a later item had the same id.
    #[cfg(test)]
    pub(crate) fn duplicates(&self) -> u32 {
        self.duplicates
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The canonical catalog text (see [`Catalog`]), which the tests compare.
#[cfg(test)]
pub(crate) fn canonical_text<'a>(items: impl IntoIterator<Item = &'a Item>) -> String {
    let (unique, _) = unique_last_wins(items);
    let mut out = String::from("[");
    for (i, it) in unique.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&it.json);
    }
    out.push(']');
    out
}

/// The items sorted by id, the last of equal ids kept; and how many were dropped.
pub(crate) fn unique_last_wins<'a>(
    items: impl IntoIterator<Item = &'a Item>,
) -> (Vec<&'a Item>, u32) {
    let mut refs: Vec<&Item> = items.into_iter().collect();
    refs.sort_by(|a, b| a.id.cmp(&b.id)); // stable: equal ids keep their given order
    let before = refs.len();
    let mut unique: Vec<&Item> = Vec::with_capacity(before);
    for it in refs {
        match unique.last_mut() {
            Some(last) if last.id == it.id => *last = it,
            _ => unique.push(it),
        }
    }
    let dropped = u32::try_from(before - unique.len()).unwrap_or(u32::MAX);
    (unique, dropped)
}

/// Why a list result could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListingError {
    /// The result (or an item) is not valid JSON.
    Json(CanonicalError),
    /// The result has no array under the kind's member.
    MissingItems { member: &'static str },
    /// Item `index` is not an object.
    NotAnObject { index: usize },
    /// Item `index` has no string identity member.
    MissingId { index: usize, member: &'static str },
    /// `nextCursor` is neither a string nor null.
    BadCursor,
}

impl fmt::Display for ListingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListingError::Json(e) => write!(f, "list result: {e}"),
            ListingError::MissingItems { member } => {
                write!(f, "list result has no `{member}` array")
            }
            ListingError::NotAnObject { index } => write!(f, "list item {index} is not an object"),
            ListingError::MissingId { index, member } => {
                write!(f, "list item {index} has no string `{member}`")
            }
            ListingError::BadCursor => f.write_str("list result `nextCursor` is not a string"),
        }
    }
}

impl std::error::Error for ListingError {}

#[cfg(test)]
mod tests {
    use super::super::hints::{CacheScope, TtlHint};
    use super::*;

    const PAGE: &str = r#"{
        "tools": [
            {"name": "get_weather", "description": "Current conditions",
             "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}},
            {"name": "add", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}
        ],
        "nextCursor": "c2", "ttlMs": 60000, "cacheScope": "public"
    }"#;

    /// The same catalog with the items in the other order, every object's keys reversed and
    /// different whitespace and escapes.
    const PAGE_REORDERED: &str = r#"{"cacheScope":"public","ttlMs":60000,"nextCursor":"c2",
        "tools":[{"annotations":{"readOnlyHint":true},"inputSchema":{"type":"object"},"name":"add"},
        {"inputSchema":{"properties":{"city":{"type":"str\u0069ng"}},"type":"object"},
         "description":"Current conditions","name":"get_weather"}]}"#;

    fn catalog(json: &str) -> Catalog {
        let page = parse_page(CatalogKind::Tools, json).expect("page");
        Catalog::from_items(CatalogKind::Tools, &page.items)
    }

    #[test]
    fn reads_items_cursor_and_hints() {
        let page = parse_page(CatalogKind::Tools, PAGE).expect("page");
        let ids: Vec<&str> = page.items.iter().map(Item::id).collect();
        assert_eq!(ids, ["add", "get_weather"]);
        assert_eq!(page.next_cursor.as_deref(), Some("c2"));
        assert_eq!(page.hints.ttl, TtlHint::Millis(60_000));
        assert_eq!(page.hints.scope, CacheScope::Public);
        assert_eq!(
            page.item("add").map(Item::json),
            Some(
                r#"{"annotations":{"readOnlyHint":true},"inputSchema":{"type":"object"},"name":"add"}"#
            )
        );
        assert!(page.item("nope").is_none());
    }

    #[test]
    fn item_and_key_order_do_not_change_the_hash() {
        let a = catalog(PAGE);
        let b = catalog(PAGE_REORDERED);
        assert_eq!(a.hash(), b.hash());
        assert_eq!(a.entries(), b.entries());
    }

    #[test]
    fn a_changed_description_changes_the_hash() {
        let changed = PAGE.replace("Current conditions", "Current conditions.");
        let (a, b) = (catalog(PAGE), catalog(&changed));
        assert_ne!(a.hash(), b.hash());
        assert_eq!(a.entries()[0], b.entries()[0], "the untouched item keeps its hash");
        assert_ne!(a.entries()[1].hash, b.entries()[1].hash);
    }

    #[test]
    fn catalog_hash_is_the_hash_of_the_canonical_text_and_is_frozen() {
        let page = parse_page(CatalogKind::Tools, PAGE).expect("page");
        let text = canonical_text(&page.items);
        assert_eq!(
            text,
            concat!(
                r#"[{"annotations":{"readOnlyHint":true},"inputSchema":{"type":"object"},"name":"add"},"#,
                r#"{"description":"Current conditions","inputSchema":{"properties":{"city":{"type":"string"}},"type":"object"},"name":"get_weather"}]"#
            )
        );
        let c = catalog(PAGE);
        assert_eq!(c.hash(), ContentHash::of(text.as_bytes()));
        // Computed once and frozen: this must hold on every machine and in every release.
        assert_eq!(c.hash().to_string(), "30b74a741176d9c0");
    }

    #[test]
    fn pages_join_into_one_catalog_whatever_the_split() {
        let p1 = parse_page(CatalogKind::Tools, r#"{"tools":[{"name":"b"}],"nextCursor":""}"#)
            .expect("page");
        let p2 = parse_page(CatalogKind::Tools, r#"{"tools":[{"name":"a"},{"name":"c"}]}"#)
            .expect("page");
        assert_eq!(p1.next_cursor.as_deref(), Some(""), "an empty cursor is a cursor");
        assert_eq!(p2.next_cursor, None);
        let joined = Catalog::from_items(CatalogKind::Tools, p1.items.iter().chain(&p2.items));
        let single = catalog(r#"{"tools":[{"name":"c"},{"name":"b"},{"name":"a"}]}"#);
        assert_eq!(joined, single);
        assert_eq!(joined.len(), 3);
    }

    #[test]
    fn a_duplicate_id_keeps_the_last_item_and_is_counted() {
        let page = parse_page(
            CatalogKind::Tools,
            r#"{"tools":[{"name":"a","v":1},{"name":"b"},{"name":"a","v":2}]}"#,
        )
        .expect("page");
        assert_eq!(page.duplicates, 1);
        assert_eq!(page.item("a").map(Item::json), Some(r#"{"name":"a","v":2}"#));
        // Across pages: the later page wins.
        let later = Item::from_json(CatalogKind::Tools, r#"{"name":"b","v":3}"#).expect("item");
        let c = Catalog::from_items(CatalogKind::Tools, page.items.iter().chain([&later]));
        assert_eq!(c.duplicates(), 1);
        assert_eq!(c.entries()[1].hash, later.hash());
    }

    #[test]
    fn identity_member_follows_the_kind() {
        let res = parse_page(
            CatalogKind::Resources,
            r#"{"resources":[{"uri":"file:///b","name":"same"},{"uri":"file:///a","name":"same"}]}"#,
        )
        .expect("page");
        assert_eq!(res.items.len(), 2, "resources are told apart by uri, not name");
        assert_eq!(res.items[0].id(), "file:///a");
        let tpl = parse_page(
            CatalogKind::ResourceTemplates,
            r#"{"resourceTemplates":[{"uriTemplate":"file:///{p}","name":"f"}]}"#,
        )
        .expect("page");
        assert_eq!(tpl.items[0].id(), "file:///{p}");
        assert_eq!(CatalogKind::Prompts.items_member(), "prompts");
        assert_eq!(CatalogKind::ResourceTemplates.method(), "resources/templates/list");
    }

    #[test]
    fn malformed_results_are_typed_errors() {
        let k = CatalogKind::Tools;
        assert!(matches!(parse_page(k, "{"), Err(ListingError::Json(_))));
        assert_eq!(
            parse_page(k, r#"{"prompts":[]}"#),
            Err(ListingError::MissingItems { member: "tools" })
        );
        assert_eq!(
            parse_page(k, r#"{"tools":[{"name":"a"},7]}"#),
            Err(ListingError::NotAnObject { index: 1 })
        );
        assert_eq!(
            parse_page(k, r#"{"tools":[{"title":"x"}]}"#),
            Err(ListingError::MissingId { index: 0, member: "name" })
        );
        assert_eq!(parse_page(k, r#"{"tools":[],"nextCursor":3}"#), Err(ListingError::BadCursor));
        assert_eq!(
            parse_page(k, r#"{"tools":[{"name":1}]}"#).map_err(|e| e.to_string()),
            Err("list item 0 has no string `name`".to_string())
        );
    }

    #[test]
    fn empty_catalog_has_a_fixed_hash() {
        let c = catalog(r#"{"tools":[]}"#);
        assert_eq!(c.len(), 0);
        assert_eq!(c.hash(), ContentHash::of(b"[]"));
    }
}
