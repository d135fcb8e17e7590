//! A local BM25 index over tools, so a host can offer a model a few tools instead of hundreds.
//!
//! Each tool is one bag of words from its name, title, description and annotations (the
//! annotation title, plus each `...Hint: true` as its words: `readOnlyHint` gives "read only").
//! Name words count twice, because a name is the most deliberate summary a server writes.
//! Words are cut at every non-alphanumeric character and at camelCase boundaries, then
//! lowercased, so `get_weather`, `getWeather` and "get weather" are the same two words.
//!
//! Ranking is Okapi BM25 with k1 = 1.2 and b = 0.75 and the non-negative idf
//! `ln(1 + (N - n + 0.5) / (n + 0.5))`; a query word counts once however often it is typed.
//! Equal scores are ordered by tool name, so the answer is deterministic. Statistics (N,
//! average length, document frequencies) are kept up to date on every change, so an index
//! changed one tool at a time ranks exactly like one built from scratch.

use std::collections::HashMap;
use std::fmt;

use super::diff::CatalogDiff;

const K1: f64 = 1.2;
const B: f64 = 0.75;
/// How many times a name word is counted.
const NAME_WEIGHT: u32 = 2;

/// Splits text into lowercase words: runs of alphanumerics, cut again at camelCase
/// boundaries (`getHTTPResponse` gives get, http, response; `v2Api` gives v2, api).
pub(crate) fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for run in text.split(|c: char| !c.is_alphanumeric()).filter(|r| !r.is_empty()) {
        let mut start = 0;
        let mut chars = run.char_indices().peekable();
        let mut prev: Option<char> = None;
        while let Some((i, c)) = chars.next() {
            let next = chars.peek().map(|&(_, n)| n);
            let boundary = match prev {
                Some(p) if c.is_uppercase() => {
                    p.is_lowercase()
                        || p.is_numeric()
                        || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
                }
                _ => false,
            };
            if boundary && i > start {
                out.push(run[start..i].to_lowercase());
                start = i;
            }
            prev = Some(c);
        }
        out.push(run[start..].to_lowercase());
    }
    out
}

/// A tool that cannot be indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SearchError {
    /// The tool is not a JSON object.
    NotAnObject,
    /// The tool has no string `name`.
    MissingName,
    /// A changed or added name from a diff has no definition in the new catalog.
    MissingDefinition,
}

impl fmt::Display for SearchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SearchError::NotAnObject => "tool definition is not a JSON object",
            SearchError::MissingName => "tool definition has no string `name`",
            SearchError::MissingDefinition => "diff names a tool the new catalog does not have",
        })
    }
}

impl std::error::Error for SearchError {}

/// One ranked candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Hit<'a> {
    pub(crate) name: &'a str,
    pub(crate) score: f64,
}

#[derive(Debug)]
struct Doc {
    name: Box<str>,
    /// Words counted, with the name weight.
    len: u32,
    /// The distinct words, to find its postings again on removal.
    terms: Vec<Box<str>>,
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    tf: u32,
}

/// The index. Documents live in slots reused after removal.
#[derive(Debug, Default)]
pub(crate) struct SearchIndex {
    docs: Vec<Option<Doc>>,
    free: Vec<u32>,
    by_name: HashMap<Box<str>, u32>,
    postings: HashMap<Box<str>, Vec<Posting>>,
    total_len: u64,
}

impl SearchIndex {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Tools indexed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_name.len()
    }

    /// No tool indexed.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Adds a tool from its JSON definition, replacing one of the same name.
    pub(crate) fn upsert(&mut self, tool_json: &str) -> Result<(), SearchError> {
        let v: serde_json::Value =
            serde_json::from_str(tool_json).map_err(|_| SearchError::NotAnObject)?;
        let obj = v.as_object().ok_or(SearchError::NotAnObject)?;
        let name = obj.get("name").and_then(|n| n.as_str()).ok_or(SearchError::MissingName)?;
        let mut counts: HashMap<String, u32> = HashMap::new();
        let mut len = 0u32;
        let mut add = |text: &str, weight: u32| {
            for w in tokenize(text) {
                *counts.entry(w).or_insert(0) += weight;
                len = len.saturating_add(weight);
            }
        };
        add(name, NAME_WEIGHT);
        for field in ["title", "description"] {
            if let Some(t) = obj.get(field).and_then(|t| t.as_str()) {
                add(t, 1);
            }
        }
        if let Some(ann) = obj.get("annotations").and_then(|a| a.as_object()) {
            if let Some(t) = ann.get("title").and_then(|t| t.as_str()) {
                add(t, 1);
            }
            for (k, val) in ann {
                if let (Some(hint), Some(true)) = (k.strip_suffix("Hint"), val.as_bool()) {
                    add(hint, 1);
                }
            }
        }
        self.remove(name);
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.docs.push(None);
                // Slots past u32::MAX tools are not a real concern; saturate rather than wrap.
                u32::try_from(self.docs.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let mut terms: Vec<Box<str>> = Vec::with_capacity(counts.len());
        for (term, tf) in counts {
            let term: Box<str> = term.into();
            self.postings.entry(term.clone()).or_default().push(Posting { doc: slot, tf });
            terms.push(term);
        }
        let name: Box<str> = name.into();
        self.by_name.insert(name.clone(), slot);
        self.total_len += u64::from(len);
        if let Some(d) = self.docs.get_mut(slot as usize) {
            *d = Some(Doc { name, len, terms });
        }
        Ok(())
    }

    /// Removes a tool; false when it was not there.
    pub(crate) fn remove(&mut self, name: &str) -> bool {
        let Some(slot) = self.by_name.remove(name) else { return false };
        let Some(doc) = self.docs.get_mut(slot as usize).and_then(Option::take) else {
            return false;
        };
        for term in &doc.terms {
            if let Some(list) = self.postings.get_mut(term) {
                list.retain(|p| p.doc != slot);
                if list.is_empty() {
                    self.postings.remove(term);
                }
            }
        }
        self.total_len -= u64::from(doc.len);
        self.free.push(slot);
        true
    }

    /// Applies a catalog diff: removes what was removed and re-indexes what was added or
    /// changed, reading each definition with `definition(name)` from the new catalog.
    pub(crate) fn apply<'a>(
        &mut self,
        diff: &CatalogDiff,
        definition: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<(), SearchError> {
        for name in &diff.removed {
            self.remove(name);
        }
        for name in diff.added.iter().chain(&diff.changed) {
            let json = definition(name).ok_or(SearchError::MissingDefinition)?;
            self.upsert(json)?;
        }
        Ok(())
    }

    /// The `k` best tools for `query`, best first; tools matching no query word are left out.
    pub(crate) fn search(&self, query: &str, k: usize) -> Vec<Hit<'_>> {
        let n_docs = self.by_name.len();
        if k == 0 || n_docs == 0 {
            return Vec::new();
        }
        let avgdl = self.total_len as f64 / n_docs as f64;
        let mut words = tokenize(query);
        // Distinct words in first-seen order: the summation order is then fixed.
        let mut seen = std::collections::HashSet::new();
        words.retain(|w| seen.insert(w.clone()));
        let mut scores = vec![0.0f64; self.docs.len()];
        let mut touched: Vec<u32> = Vec::new();
        for w in &words {
            let Some(list) = self.postings.get(w.as_str()) else { continue };
            let df = list.len() as f64;
            let idf = (1.0 + (n_docs as f64 - df + 0.5) / (df + 0.5)).ln();
            for p in list {
                let Some(Some(doc)) = self.docs.get(p.doc as usize) else { continue };
                let tf = f64::from(p.tf);
                let norm = K1 * (1.0 - B + B * f64::from(doc.len) / avgdl);
                let s = idf * tf * (K1 + 1.0) / (tf + norm);
                if let Some(slot) = scores.get_mut(p.doc as usize) {
                    if *slot == 0.0 {
                        touched.push(p.doc);
                    }
                    *slot += s;
                }
            }
        }
        let mut hits: Vec<Hit<'_>> = touched
            .into_iter()
            .filter_map(|d| {
                let doc = self.docs.get(d as usize)?.as_ref()?;
                Some(Hit { name: &doc.name, score: *scores.get(d as usize)? })
            })
            .collect();
        let order =
            |a: &Hit<'_>, b: &Hit<'_>| b.score.total_cmp(&a.score).then_with(|| a.name.cmp(b.name));
        if hits.len() > k {
            hits.select_nth_unstable_by(k - 1, order);
            hits.truncate(k);
        }
        hits.sort_unstable_by(order);
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::super::diff::diff;
    use super::super::listing::{find, parse_page, Catalog, CatalogKind};
    use super::*;

    const TOOLS: &[&str] = &[
        r#"{"name":"get_weather","description":"Current weather for a city"}"#,
        r#"{"name":"get_forecast","description":"Weather forecast for the next days"}"#,
        r#"{"name":"send_email","description":"Send an email message","annotations":{"destructiveHint":true}}"#,
        r#"{"name":"read_file","title":"Read file","description":"Read a file from disk","annotations":{"readOnlyHint":true,"destructiveHint":false}}"#,
        r#"{"name":"deleteFile","description":"Delete a file from disk","annotations":{"title":"Remove file","destructiveHint":true}}"#,
    ];

    fn index(tools: &[&str]) -> SearchIndex {
        let mut ix = SearchIndex::new();
        for t in tools {
            ix.upsert(t).expect("tool");
        }
        ix
    }

    fn names(hits: &[Hit<'_>]) -> Vec<String> {
        hits.iter().map(|h| h.name.to_string()).collect()
    }

    #[test]
    fn tokenizes_snake_camel_and_acronyms() {
        assert_eq!(
            tokenize("getHTTPResponse_code v2Api  XMLParser--go"),
            ["get", "http", "response", "code", "v2", "api", "xml", "parser", "go"]
        );
        assert_eq!(tokenize("  __ "), Vec::<String>::new());
        assert_eq!(tokenize("Ünïcode Straße"), ["ünïcode", "straße"]);
    }

    #[test]
    fn ranks_a_small_catalog_in_the_expected_order() {
        let ix = index(TOOLS);
        // The name counts twice, so the tool named for the weather beats the one that only
        // mentions it.
        assert_eq!(names(&ix.search("weather", 5)), ["get_weather", "get_forecast"]);
        // Annotation hints are words: only read_file is read-only.
        assert_eq!(names(&ix.search("read only", 5))[0], "read_file");
        // destructive: the two destructive tools, and read_file's `false` hint is no word.
        let d = names(&ix.search("destructive", 5));
        assert_eq!(d.len(), 2);
        assert!(d.contains(&"send_email".to_string()) && d.contains(&"deleteFile".to_string()));
        // camelCase names are searchable by their words; the annotation title counts too.
        assert_eq!(names(&ix.search("remove", 5)), ["deleteFile"]);
        assert_eq!(names(&ix.search("Delete-FILE", 1)), ["deleteFile"]);
        // k cuts the list.
        assert_eq!(ix.search("file disk weather", 2).len(), 2);
    }

    #[test]
    fn matches_the_bm25_formula() {
        let ix =
            index(&[r#"{"name":"a","description":"x y"}"#, r#"{"name":"b","description":"y"}"#]);
        // Lengths: a = 2 (name, weighted) + 2 = 4, b = 2 + 1 = 3; avgdl 3.5; N 2; df(x) 1.
        let idf = (1.0f64 + (2.0 - 1.0 + 0.5) / (1.0 + 0.5)).ln();
        let want = idf * 1.0 * 2.2 / (1.0 + 1.2 * (1.0 - 0.75 + 0.75 * 4.0 / 3.5));
        let hits = ix.search("x", 10);
        assert_eq!(names(&hits), ["a"]);
        assert!((hits[0].score - want).abs() < 1e-12, "{} vs {want}", hits[0].score);
    }

    #[test]
    fn ties_are_broken_by_name_whatever_the_insert_order() {
        let ix = index(&[
            r#"{"name":"zeta_tool","description":"common"}"#,
            r#"{"name":"alpha_tool","description":"common"}"#,
            r#"{"name":"mid_tool","description":"common"}"#,
        ]);
        let hits = ix.search("common", 10);
        assert_eq!(names(&hits), ["alpha_tool", "mid_tool", "zeta_tool"]);
        assert_eq!(hits[0].score, hits[2].score);
        assert_eq!(names(&ix.search("common", 2)), ["alpha_tool", "mid_tool"]);
    }

    #[test]
    fn empty_query_unknown_words_and_zero_k_find_nothing() {
        let ix = index(TOOLS);
        assert!(ix.search("", 5).is_empty());
        assert!(ix.search(" -- ", 5).is_empty());
        assert!(ix.search("zebra quantum", 5).is_empty());
        assert!(ix.search("weather", 0).is_empty());
        assert!(SearchIndex::new().search("weather", 5).is_empty());
        // An unknown word next to a known one changes nothing.
        assert_eq!(ix.search("weather zebra", 5), ix.search("weather", 5));
        // A repeated query word counts once.
        assert_eq!(ix.search("weather weather", 5), ix.search("weather", 5));
    }

    #[test]
    fn incremental_updates_rank_exactly_like_a_rebuild() {
        let mut ix = index(TOOLS);
        assert!(ix.remove("send_email"));
        assert!(!ix.remove("send_email"));
        ix.upsert(r#"{"name":"get_weather","description":"Weather now, anywhere"}"#).expect("tool");
        ix.upsert(r#"{"name":"send_sms","description":"Send a text message"}"#).expect("tool");
        let rebuilt = index(&[
            TOOLS[1],
            TOOLS[3],
            TOOLS[4],
            r#"{"name":"send_sms","description":"Send a text message"}"#,
            r#"{"name":"get_weather","description":"Weather now, anywhere"}"#,
        ]);
        assert_eq!(ix.len(), 5);
        for q in ["weather", "send message", "file disk", "read only destructive", "email"] {
            assert_eq!(ix.search(q, 10), rebuilt.search(q, 10), "query {q:?}");
        }
        assert!(ix.search("email", 10).is_empty(), "removed words are gone");
    }

    #[test]
    fn applies_a_catalog_diff() {
        let listing = |tools: &str| {
            parse_page(CatalogKind::Tools, &format!(r#"{{"tools":[{tools}]}}"#)).expect("page")
        };
        let old = listing(&TOOLS[..3].join(","));
        let new = listing(&[TOOLS[0], TOOLS[2], TOOLS[3]].join(","));
        let mut ix = SearchIndex::new();
        for it in &old.items {
            ix.upsert(it.json()).expect("tool");
        }
        let d = diff(
            &Catalog::from_items(CatalogKind::Tools, &old.items),
            &Catalog::from_items(CatalogKind::Tools, &new.items),
        )
        .expect("same kind");
        ix.apply(&d, |name| find(&new.items, name).map(|it| it.json())).expect("applies");
        assert_eq!(names(&ix.search("forecast", 5)), Vec::<String>::new());
        assert_eq!(names(&ix.search("disk", 5)), ["read_file"]);
        assert_eq!(ix.len(), 3);
        assert_eq!(ix.apply(&d, |_| None), Err(SearchError::MissingDefinition));
    }

    #[test]
    fn malformed_tools_are_refused() {
        let mut ix = SearchIndex::new();
        assert_eq!(ix.upsert("[1]"), Err(SearchError::NotAnObject));
        assert_eq!(ix.upsert("{"), Err(SearchError::NotAnObject));
        assert_eq!(ix.upsert(r#"{"title":"x"}"#), Err(SearchError::MissingName));
        assert_eq!(ix.len(), 0);
        // Wrong types in optional fields are skipped, not fatal.
        ix.upsert(r#"{"name":"t","description":7,"annotations":{"readOnlyHint":"yes"}}"#)
            .expect("tool");
        assert_eq!(names(&ix.search("t", 5)), ["t"]);
    }
}
