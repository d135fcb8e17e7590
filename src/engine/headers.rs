//! `x-mcp-header`: tool arguments mirrored into `Mcp-Param-*` HTTP headers (2026-07-28,
//! PROTOCOL.md §2.6 and §3.3).
//!
//! When a `tools/list` completes over HTTP, each tool's `inputSchema` is checked against the
//! annotation's rules; a tool that breaks them is dropped from the listed view with a warning,
//! and the others' header paths are kept here. A `tools/call` of a tool with headers then reads
//! those argument values. Only tools that declare headers cost a parse of their arguments.

use std::collections::{HashMap, HashSet};

use smallvec::SmallVec;

use crate::engine::retry::Idempotency;
use crate::proto::json::{self, Kind, RawJson};

/// One `x-mcp-header` annotation: the header suffix and the property path to its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamHeader {
    pub(crate) name: String,
    pub(crate) path: Vec<String>,
}

/// A tool's `execution.taskSupport` (2025-11-25); absent means forbidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskSupport {
    Forbidden,
    Optional,
    Required,
}

/// Header annotations of every listed tool that has any, and the idempotency its annotations
/// claim (`readOnlyHint`, `idempotentHint`).
#[derive(Debug, Default)]
pub(crate) struct ToolHeaders {
    by_tool: HashMap<String, Vec<ParamHeader>>,
    classes: HashMap<String, Idempotency>,
    /// Tools whose `execution.taskSupport` is `"optional"` (false) or `"required"` (true).
    tasks: HashMap<String, bool>,
    /// A listing was read: a tool missing from `tasks` forbids tasks.
    listed: bool,
    /// The tools named by the pages of the one-page walk under way, since its first page:
    /// at its last page every entry of a tool it did not name goes, so a server that renames
    /// its tools at every listing cannot grow the table for the engine's life.
    walk: Option<HashSet<String>>,
}

/// The tool tables hold about this many bytes at most (a server of ten thousand tools with
/// names of 30 bytes holds about a megabyte).
const MAX_HELD_BYTES: usize = 8 * 1024 * 1024;

/// Where a page of a one-page walk ([`ToolHeaders::learn_page`]) stands in its listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageAt {
    /// Asked for without a cursor: a walk starts.
    pub(crate) first: bool,
    /// Without `nextCursor`: the walk ends.
    pub(crate) last: bool,
}

impl ToolHeaders {
    /// Replaces the table from a complete tool listing (a JSON array of tools) and returns the
    /// listing without the tools whose annotations break the rules, or `None` when every tool
    /// is fine (the listing is then used as it is).
    pub(crate) fn learn(&mut self, items: &[u8], enforce_headers: bool) -> Option<Vec<u8>> {
        self.by_tool.clear();
        self.classes.clear();
        self.tasks.clear();
        self.walk = None;
        self.learn_page(items, enforce_headers, PageAt { first: false, last: false })
    }

    /// As [`learn`](Self::learn), from one page of a listing: the page's tools replace their
    /// own entries and every other tool keeps its until the walk's last page, where the tools
    /// no page of the walk named lose theirs (a walk whose first page this engine did not
    /// read sweeps nothing).
    pub(crate) fn learn_page(
        &mut self,
        items: &[u8],
        enforce_headers: bool,
        at: PageAt,
    ) -> Option<Vec<u8>> {
        if at.first {
            self.walk = Some(HashSet::new());
        }
        let mut kept = self.learn_tools(items, enforce_headers);
        if let Some(named) = self.walk.take_if(|_| at.last) {
            self.by_tool.retain(|tool, _| named.contains(tool));
            self.classes.retain(|tool, _| named.contains(tool));
            self.tasks.retain(|tool, _| named.contains(tool));
        }
        if self.held_bytes() > MAX_HELD_BYTES {
            // Walks that never end (a repeated cursor, too many pages) or never start on this
            // engine (the cache had the first page) sweep nothing: a server naming new tools
            // on every page would grow the tables for the engine's life. Past the bound the
            // tables start over from this page; the tools of other pages are unknown (no
            // class, no task support, no headers) until their page is read again.
            log::debug!("the tool tables passed {MAX_HELD_BYTES} bytes: kept this page's only");
            self.by_tool.clear();
            self.classes.clear();
            self.tasks.clear();
            self.walk = None;
            kept = self.learn_tools(items, enforce_headers);
        }
        kept
    }

    /// About what the tables hold: their tools' names and header paths.
    fn held_bytes(&self) -> usize {
        let headers = |h: &Vec<ParamHeader>| -> usize {
            h.iter().map(|p| p.name.len() + p.path.iter().map(String::len).sum::<usize>()).sum()
        };
        let by_tool: usize = self.by_tool.iter().map(|(t, h)| t.len() + headers(h)).sum();
        let classes: usize = self.classes.keys().map(String::len).sum();
        let tasks: usize = self.tasks.keys().map(String::len).sum();
        let walk: usize = self.walk.iter().flatten().map(String::len).sum();
        by_tool + classes + tasks + walk
    }

    fn learn_tools(&mut self, items: &[u8], enforce_headers: bool) -> Option<Vec<u8>> {
        let tools = json::parse(items).ok().filter(|t| t.kind() == Kind::Array)?;
        // The kept tools' text, as the server wrote it: made only once a tool is dropped (a
        // listing can be megabytes, and usually nothing is).
        let mut kept: Option<Vec<u8>> = None;
        for (i, tool) in tools.elements().enumerate() {
            let name = tool.get("name").and_then(RawJson::as_str).unwrap_or_default().into_owned();
            self.by_tool.remove(&name);
            self.classes.remove(&name);
            self.tasks.remove(&name);
            self.listed = true;
            if let Some(named) = self.walk.as_mut() {
                named.insert(name.clone());
            }
            let execution = tool.get("execution").and_then(|e| e.get("taskSupport"));
            match execution.and_then(RawJson::as_str).as_deref() {
                Some("optional") => _ = self.tasks.insert(name.clone(), false),
                Some("required") => _ = self.tasks.insert(name.clone(), true),
                _ => {}
            }
            let annotations = tool.get("annotations");
            let hint = |key: &str| annotations.and_then(|a| a.get(key)).and_then(RawJson::as_bool);
            if hint("readOnlyHint") == Some(true) {
                self.classes.insert(name.clone(), Idempotency::Read);
            } else if hint("idempotentHint") == Some(true) {
                self.classes.insert(name.clone(), Idempotency::Idempotent);
            }
            let keep = !enforce_headers
                || match headers_of(tool.get("inputSchema")) {
                    Ok(headers) => {
                        if !headers.is_empty() {
                            self.by_tool.insert(name, headers);
                        }
                        true
                    }
                    Err(reason) => {
                        log::warn!("dropping tool {name:?} from the list: x-mcp-header {reason}");
                        false
                    }
                };
            if !keep && kept.is_none() {
                // The first one dropped: every tool before it was kept.
                let mut before = Vec::new();
                for earlier in tools.elements().take(i) {
                    push_item(&mut before, earlier);
                }
                kept = Some(before);
            } else if let (true, Some(kept)) = (keep, kept.as_mut()) {
                push_item(kept, tool);
            }
        }
        // The caller wants the items without the surrounding brackets.
        kept
    }

    /// What the listings say about running `tool` as a task (2025-11-25
    /// `execution.taskSupport`): `None` before any listing.
    pub(crate) fn task_support(&self, tool: &str) -> Option<TaskSupport> {
        if !self.listed {
            return None;
        }
        if self.tasks.is_empty() {
            // Most servers have no task tools: no hashing of the name on every call.
            return Some(TaskSupport::Forbidden);
        }
        Some(match self.tasks.get(tool) {
            Some(true) => TaskSupport::Required,
            Some(false) => TaskSupport::Optional,
            None => TaskSupport::Forbidden,
        })
    }

    /// How many tools have headers here.
    #[cfg(test)]
    pub(crate) fn tools_with_headers(&self) -> usize {
        self.by_tool.len()
    }

    /// What the last listing's annotations say about sending `tool` twice (`None`: unknown).
    pub(crate) fn class_of(&self, tool: &str) -> Option<Idempotency> {
        self.classes.get(tool).copied()
    }

    /// Fills `out` with the headers the call's arguments fill, each value encoded for HTTP.
    pub(crate) fn write_for_call(&self, tool: &str, arguments: &str, out: &mut ParamHeaderList) {
        let Some(headers) = self.by_tool.get(tool) else { return };
        let Ok(args) = json::parse(arguments.as_bytes()) else { return };
        for h in headers {
            let mut v = Some(args);
            for key in &h.path {
                v = v.and_then(|v| v.get(key));
            }
            // Absent or null (or of another kind): the header is left out (§3.3 step 3).
            let Some(v) = v else { continue };
            match v.kind() {
                Kind::String => out.push(&h.name, &v.as_str().unwrap_or_default()),
                // An integer's JSON text is its decimal form.
                Kind::Number if v.as_i64().is_some() || v.as_u64().is_some() => {
                    out.push(&h.name, v.text())
                }
                // So is that of an integer written otherwise (`1.0`, `1e2`, `-0`): JSON Schema
                // counts them as integers, and a server that checks the header against the
                // body reads its value (the TypeScript SDK's `String(1.0)` is "1"), so leaving
                // the header out made it refuse the call (-32020). Exactly, up to 2^53.
                Kind::Number => {
                    const EXACT: f64 = 9_007_199_254_740_992.0;
                    let whole = v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() <= EXACT);
                    if let Some(f) = whole {
                        out.push(&h.name, &(f as i64).to_string());
                    }
                }
                Kind::Bool => out.push(&h.name, v.text()),
                _ => {}
            }
        }
    }
}

/// Appends `tool`'s text to a comma-separated list of items.
fn push_item(list: &mut Vec<u8>, tool: RawJson<'_>) {
    if !list.is_empty() {
        list.push(b',');
    }
    list.extend_from_slice(tool.text().as_bytes());
}

/// The `Mcp-Param-*` headers of one request, built once per call into buffers the request's
/// slot reuses, and read in place by [`ParamHeaders`].
///
/// Every pending slot has one, and most calls have no such headers (stdio never does), so the
/// buffers sit behind a box made on the first push and kept for reuse: 8 bytes per slot
/// instead of 120.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ParamHeaderList(Option<Box<HeaderBufs>>);

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct HeaderBufs {
    /// Full header names, back to back.
    names: String,
    /// Encoded values, back to back.
    values: Vec<u8>,
    /// Where each header's name and value end in `names` and `values`.
    ends: SmallVec<[(usize, usize); 4]>,
}

impl ParamHeaderList {
    pub(crate) fn clear(&mut self) {
        if let Some(b) = self.0.as_mut() {
            b.names.clear();
            b.values.clear();
            b.ends.clear();
        }
    }

    fn bufs(&mut self) -> &mut HeaderBufs {
        self.0.get_or_insert_with(Box::default)
    }

    /// Adds `Mcp-Param-<suffix>` with `value` encoded for a header (PROTOCOL.md §3.2).
    fn push(&mut self, suffix: &str, value: &str) {
        let b = self.bufs();
        b.names.push_str("Mcp-Param-");
        b.names.push_str(suffix);
        crate::proto::header_value::encode(&mut b.values, value.as_bytes());
        b.ends.push((b.names.len(), b.values.len()));
    }

    /// Replaces the list with a copy of `headers` (a transport keeps it for a resend).
    #[cfg(feature = "http")]
    pub(crate) fn copy_from(&mut self, headers: ParamHeaders<'_>) {
        self.clear();
        for (name, value) in headers {
            let b = self.bufs();
            b.names.push_str(name);
            b.values.extend_from_slice(value);
            b.ends.push((b.names.len(), b.values.len()));
        }
    }

    pub(crate) fn iter(&self) -> ParamHeaders<'_> {
        ParamHeaders { list: self.0.as_deref(), next: 0 }
    }

    /// No header: most calls' (only tools whose listing declares `x-mcp-header` have any).
    #[cfg(feature = "http")]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|b| b.ends.is_empty())
    }
}

/// The `Mcp-Param-*` headers of a `tools/call` as (header name, encoded value) pairs, for
/// tools whose listing declared `x-mcp-header` arguments; borrowed from the engine.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ParamHeaders<'a> {
    list: Option<&'a HeaderBufs>,
    next: usize,
}

impl<'a> Iterator for ParamHeaders<'a> {
    type Item = (&'a str, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let list = self.list?;
        let &(name_end, value_end) = list.ends.get(self.next)?;
        let (name_start, value_start) =
            self.next.checked_sub(1).and_then(|i| list.ends.get(i)).copied().unwrap_or((0, 0));
        self.next += 1;
        Some((list.names.get(name_start..name_end)?, list.values.get(value_start..value_end)?))
    }
}

/// The valid annotations of one schema, or why it breaks the rules.
fn headers_of(schema: Option<RawJson<'_>>) -> Result<Vec<ParamHeader>, &'static str> {
    let Some(schema) = schema else { return Ok(Vec::new()) };
    let total = count_annotations(schema);
    if total == 0 {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    collect(schema, &mut Vec::new(), &mut found)?;
    if found.len() != total {
        return Err("is reachable other than through `properties` alone");
    }
    for (i, a) in found.iter().enumerate() {
        if found[..i].iter().any(|b| b.name.eq_ignore_ascii_case(&a.name)) {
            return Err("values are not unique");
        }
    }
    Ok(found)
}

/// Every `x-mcp-header` member anywhere in `v`. (The text was validated, so its nesting, and
/// this recursion, is at most `json::MAX_DEPTH` deep.)
fn count_annotations(v: RawJson<'_>) -> usize {
    match v.kind() {
        Kind::Object => v
            .members()
            .map(|(key, value)| usize::from(key.eq_str("x-mcp-header")) + count_annotations(value))
            .sum(),
        Kind::Array => v.elements().map(count_annotations).sum(),
        _ => 0,
    }
}

/// Walks `properties` only, collecting annotations and checking each one's property.
fn collect(
    schema: RawJson<'_>,
    path: &mut Vec<String>,
    out: &mut Vec<ParamHeader>,
) -> Result<(), &'static str> {
    let Some(props) = schema.get("properties").filter(|p| p.kind() == Kind::Object) else {
        return Ok(());
    };
    for (key, prop) in props.members() {
        path.push(key.as_str().into_owned());
        if let Some(annotation) = prop.get("x-mcp-header") {
            let name = annotation.as_str().ok_or("is not a string")?;
            if name.is_empty() || !name.bytes().all(is_tchar) {
                return Err("is not an HTTP token");
            }
            match prop.get("type").and_then(RawJson::as_str).as_deref() {
                Some("string" | "integer" | "boolean") => {}
                _ => return Err("is on a property that is not a string, integer or boolean"),
            }
            out.push(ParamHeader { name: name.into_owned(), path: path.clone() });
        }
        collect(prop, path, out)?;
        path.pop();
    }
    Ok(())
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn learn(tools: Value) -> (ToolHeaders, Option<Value>) {
        let mut t = ToolHeaders::default();
        let items = serde_json::to_vec(&tools).unwrap();
        let rewritten = t.learn(&items, true).map(|inner| {
            let mut s = b"[".to_vec();
            s.extend_from_slice(&inner);
            s.push(b']');
            serde_json::from_slice(&s).unwrap()
        });
        (t, rewritten)
    }

    fn pairs(list: &ParamHeaderList) -> Vec<(String, String)> {
        list.iter().map(|(n, v)| (n.to_owned(), String::from_utf8_lossy(v).into_owned())).collect()
    }

    fn tool(name: &str, props: Value) -> Value {
        serde_json::json!({"name": name, "inputSchema": {"type": "object", "properties": props}})
    }

    /// Pages of walks that never reach their last page (or whose first page this engine did
    /// not read) swept nothing: a server naming new tools on every page grew the tables for
    /// the engine's life. They are bounded; the page just read is kept whole.
    #[test]
    fn pages_that_sweep_nothing_are_bounded() {
        let mut t = ToolHeaders::default();
        let mid = PageAt { first: false, last: false };
        let long = "n".repeat(64 << 10);
        for i in 0..512 {
            let schema = serde_json::json!({"a": {"type": "string", "x-mcp-header": "A"}});
            let mut page = tool(&format!("{long}{i}"), schema);
            page["annotations"] = serde_json::json!({"readOnlyHint": true});
            page["execution"] = serde_json::json!({"taskSupport": "optional"});
            let items = serde_json::to_vec(&Value::Array(vec![page])).unwrap();
            t.learn_page(&items, true, mid);
            assert!(t.held_bytes() <= MAX_HELD_BYTES, "{} bytes at page {i}", t.held_bytes());
        }
        let last = format!("{long}511");
        assert_eq!(t.class_of(&last), Some(Idempotency::Read));
        assert_eq!(t.task_support(&last), Some(TaskSupport::Optional));
        let mut out = ParamHeaderList::default();
        t.write_for_call(&last, r#"{"a":"x"}"#, &mut out);
        assert_eq!(pairs(&out), [("Mcp-Param-A".to_owned(), "x".to_owned())]);
    }

    #[test]
    fn spec_example_tool_keeps_its_header() {
        let example: Value =
            serde_json::from_str(include_str!("../../tests/data/spec/2026-tools-list-result.json"))
                .unwrap();
        let (t, rewritten) = learn(example["result"]["tools"].clone());
        assert!(rewritten.is_none(), "the spec example is valid");
        let mut out = ParamHeaderList::default();
        t.write_for_call("get_weather", r#"{"city":"Oslo","region":"eu-north"}"#, &mut out);
        assert_eq!(pairs(&out), [("Mcp-Param-Region".to_owned(), "eu-north".to_owned())]);
    }

    #[test]
    fn values_are_converted_and_encoded_and_absent_ones_left_out() {
        let (t, _) = learn(serde_json::json!([tool(
            "t",
            serde_json::json!({
                "s": {"type": "string", "x-mcp-header": "S"},
                "i": {"type": "integer", "x-mcp-header": "I"},
                "b": {"type": "boolean", "x-mcp-header": "B"},
                "n": {"type": "object", "properties": {"deep": {"type": "string", "x-mcp-header": "Deep"}}},
                "z": {"type": "string", "x-mcp-header": "Z"}
            })
        )]));
        let mut out = ParamHeaderList::default();
        t.write_for_call(
            "t",
            r#"{"s":"Hello, 世界","i":-42,"b":true,"n":{"deep":"x"},"z":null}"#,
            &mut out,
        );
        let mut got = pairs(&out);
        got.sort();
        assert_eq!(
            got,
            [
                ("Mcp-Param-B".into(), "true".into()),
                ("Mcp-Param-Deep".into(), "x".into()),
                ("Mcp-Param-I".into(), "-42".into()),
                ("Mcp-Param-S".into(), "=?base64?SGVsbG8sIOS4lueVjA==?=".into())
            ]
        );
    }

    #[test]
    fn tools_that_break_the_rules_are_dropped_from_the_view() {
        let bad = [
            tool("number", serde_json::json!({"x": {"type": "number", "x-mcp-header": "X"}})),
            tool(
                "dupe",
                serde_json::json!({"a": {"type": "string", "x-mcp-header": "Dup"},
                                              "b": {"type": "string", "x-mcp-header": "dUP"}}),
            ),
            tool(
                "space",
                serde_json::json!({"a": {"type": "string", "x-mcp-header": "has space"}}),
            ),
            tool("empty", serde_json::json!({"a": {"type": "string", "x-mcp-header": ""}})),
            tool(
                "items",
                serde_json::json!({"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}),
            ),
            serde_json::json!({"name": "anyof", "inputSchema": {"type": "object",
                "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}}),
        ];
        let good = tool("fine", serde_json::json!({"a": {"type": "string", "x-mcp-header": "A"}}));
        let mut all = bad.to_vec();
        all.push(good.clone());
        all.push(serde_json::json!({"name": "plain", "inputSchema": {"type": "object"}}));
        let (t, rewritten) = learn(Value::Array(all));
        let names: Vec<String> = rewritten
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["fine", "plain"]);
        let mut out = ParamHeaderList::default();
        t.write_for_call("number", r#"{"x":1}"#, &mut out);
        assert_eq!(out.iter().count(), 0, "dropped tools contribute no headers");
        // The kept list is made at the first drop: the tools before it are in it, in order.
        let plain =
            |name: &str| serde_json::json!({"name": name, "inputSchema": {"type": "object"}});
        let mixed = vec![plain("a"), plain("b"), bad[0].clone(), plain("c"), bad[1].clone()];
        let (_, rewritten) = learn(Value::Array(mixed));
        let rewritten = rewritten.unwrap();
        let names: Vec<&str> =
            rewritten.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        let (_, none_dropped) = learn(Value::Array(vec![plain("a"), plain("b")]));
        assert_eq!(none_dropped, None, "nothing dropped: no copy");
    }

    #[test]
    fn integers_in_any_notation_count_as_numbers_and_escapes_are_read() {
        let (t, _) = learn(serde_json::json!([tool(
            "t",
            serde_json::json!({
                "s": {"type": "string", "x-mcp-header": "S"},
                "i": {"type": "integer", "x-mcp-header": "I"}
            })
        )]));
        for not_integer in ["1.5", "1e-2", "1e300"] {
            let mut out = ParamHeaderList::default();
            t.write_for_call("t", &format!(r#"{{"i":{not_integer}}}"#), &mut out);
            assert_eq!(out.iter().count(), 0, "{not_integer}");
        }
        // Integers written as a JSON Schema integer may be: their decimal form.
        for (written, decimal) in [("1e2", "100"), ("-0", "0"), ("1.0", "1"), ("-2.0e0", "-2")] {
            let mut out = ParamHeaderList::default();
            t.write_for_call("t", &format!(r#"{{"i":{written}}}"#), &mut out);
            assert_eq!(pairs(&out), [("Mcp-Param-I".into(), decimal.into())], "{written}");
        }
        let mut out = ParamHeaderList::default();
        t.write_for_call("t", r#"{"s":"a\u0041","i":18446744073709551615}"#, &mut out);
        let mut got = pairs(&out);
        got.sort();
        assert_eq!(
            got,
            [
                ("Mcp-Param-I".into(), "18446744073709551615".into()),
                ("Mcp-Param-S".into(), "aA".into())
            ]
        );
    }

    #[test]
    fn annotation_hints_set_the_class() {
        let mut t = ToolHeaders::default();
        let items = br#"[{"name":"r","annotations":{"readOnlyHint":true}},
            {"name":"i","annotations":{"readOnlyHint":false,"idempotentHint":true}},
            {"name":"w","annotations":{}}, 7]"#;
        assert!(t.learn(items, false).is_none());
        assert_eq!(t.class_of("r"), Some(Idempotency::Read));
        assert_eq!(t.class_of("i"), Some(Idempotency::Idempotent));
        assert_eq!(t.class_of("w"), None);
    }
}
