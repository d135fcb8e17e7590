//! Listings: the pages gathered behind `nextCursor` joined into one answer, with the hints
//! (time to live, scope) the joined answer carries.

use super::ending::Outcome;
use crate::proto::json::RawJson;
use crate::proto::mcp::ResultType;

/// The cache hints of a listing's pages, combined for the one joined result: the shortest
/// `ttlMs` of any page, and `cacheScope: "public"` only when every page said so. A 2026-07-28
/// page whose `ttlMs` is missing, negative or malformed counts as 0 (immediately stale), as
/// the revision says; a 2025-11-25 listing has none and carries none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ListHints {
    pages: u32,
    ttl_ms: Option<u64>,
    public_pages: u32,
}

impl ListHints {
    /// Adds a page of a listing in the 2026-07-28 era (`modern`) or the 2025-11-25 one.
    pub(super) fn add(&mut self, page: RawJson<'_>, modern: bool) {
        self.pages += 1;
        let ttl = page.get("ttlMs").filter(|n| n.kind() == crate::proto::json::Kind::Number);
        let ttl = ttl.and_then(|n| crate::proto::json::whole_number(n.text()));
        if let Some(ttl) = ttl.or(modern.then_some(0)) {
            self.ttl_ms = Some(self.ttl_ms.map_or(ttl, |t| t.min(ttl)));
        }
        if page.get("cacheScope").is_some_and(|s| s.as_str().as_deref() == Some("public")) {
            self.public_pages += 1;
        }
    }

    /// At most how many bytes [`write`](Self::write) adds.
    pub(crate) fn max_len(&self) -> usize {
        // `,"ttlMs":` and 20 digits; `,"cacheScope":"public"`.
        9 + 20 + 23
    }

    /// The members to add to the joined result, each with a leading comma.
    pub(crate) fn write(&self, out: &mut String) {
        use std::fmt::Write;
        if let Some(ttl) = self.ttl_ms {
            let _ = write!(out, ",\"ttlMs\":{ttl}");
        }
        if self.pages > 0 && self.public_pages == self.pages {
            out.push_str(",\"cacheScope\":\"public\"");
        }
    }
}

/// The room a slot's listing buffer keeps between listings; a larger one is freed.
pub(super) const LISTING_BUF_KEEP: usize = 64 * 1024;

/// A page handed on whole: a complete result.
pub(super) fn done(json: &str) -> Outcome<'_> {
    Outcome::Done { json, result_type: ResultType::Complete, is_error: false }
}

pub(super) fn cursor_hash(cursor: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    cursor.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::engine::tests::Harness;
    use crate::engine::{CallOptions, Event, TransportEvent};
    use crate::proto::mcp::Method;

    /// Lists three pages with the given extra members and returns the joined result.
    fn joined(pages: [Value; 3]) -> Value {
        let mut h = Harness::ready_modern();
        let c = h.engine.list(h.now, Method::ToolsList, &CallOptions::default()).unwrap();
        let last = pages.len() - 1;
        for (i, mut extra) in pages.into_iter().enumerate() {
            let sent = h.sent_one();
            extra["resultType"] = json!("complete");
            extra["tools"] = json!([{ "name": format!("t{i}") }]);
            if i < last {
                extra["nextCursor"] = json!(format!("c{i}"));
            }
            h.reply(&sent, extra);
        }
        match h.engine.take_call_event(c) {
            Some(Event::CallDone { result, .. }) => serde_json::from_str(result.json()).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_joined_listing_carries_the_shortest_ttl_and_public_only_when_every_page_is() {
        let public = |ttl: Value| json!({"ttlMs": ttl, "cacheScope": "public"});
        let r = joined([public(json!(5000)), public(json!(300)), public(json!(9000))]);
        assert_eq!((r["ttlMs"].clone(), r["cacheScope"].clone()), (json!(300), json!("public")));
        assert_eq!(r["tools"].as_array().map(Vec::len), Some(3));
        let r = joined([public(json!(5000)), json!({"cacheScope": "private"}), public(json!(100))]);
        assert_eq!(r["ttlMs"], 0, "a page without ttlMs is stale at once: {r}");
        assert!(r.get("cacheScope").is_none(), "one private page makes it private: {r}");
        let r = joined([
            public(json!(5000)),
            json!({"cacheScope": "private", "ttlMs": 200}),
            public(json!(100)),
        ]);
        assert_eq!(r["ttlMs"], 100);
        // Malformed or missing ttls are 0 (the revision says so); it was the longest of the
        // valid ones, or none, and a host kept pages the server had marked stale.
        for page in [json!({"ttlMs": -1}), json!({"ttlMs": 1.5}), json!({})] {
            let r = joined([public(json!(5000)), page.clone(), public(json!(9000))]);
            assert_eq!(r["ttlMs"], 0, "{page}: {r}");
        }
    }

    /// A 2025-11-25 listing has no cache hints, and its joined result carries none.
    #[test]
    fn a_joined_legacy_listing_carries_no_ttl() {
        let mut h = Harness::ready_legacy();
        let c = h.engine.list(h.now, Method::ToolsList, &CallOptions::default()).unwrap();
        let sent = h.sent_one();
        h.reply(&sent, json!({"tools": [{"name": "a"}], "nextCursor": "c"}));
        let sent = h.sent_one();
        h.reply(&sent, json!({"tools": [{"name": "b"}]}));
        let r = page_result(&mut h, c);
        assert!(r.get("ttlMs").is_none() && r.get("cacheScope").is_none(), "{r}");
    }

    fn page_result(h: &mut Harness, c: crate::CallId) -> Value {
        match h.engine.take_call_event(c) {
            Some(Event::CallDone { result, .. }) => serde_json::from_str(result.json()).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_one_page_listing_sends_the_cursor_and_hands_the_page_on_unjoined() {
        let mut h = Harness::ready_modern();
        let opts = CallOptions::default();
        let c = h.engine.list_page(h.now, Method::PromptsList, None, &opts).unwrap();
        let sent = h.sent_one();
        assert!(sent["params"].get("cursor").is_none(), "{sent}");
        let page = json!({"resultType": "complete", "prompts": [{"name": "p"}], "nextCursor": "",
            "ttlMs": 500, "cacheScope": "public"});
        h.reply(&sent, page.clone());
        assert_eq!(page_result(&mut h, c), page, "the cursor is not followed");
        assert!(h.take_sent().is_empty());
        let c = h.engine.list_page(h.now, Method::PromptsList, Some(""), &opts).unwrap();
        let sent = h.sent_one();
        assert_eq!(sent["params"]["cursor"], "", "an empty cursor is a cursor");
        h.reply(&sent, json!({"resultType": "complete", "prompts": []}));
        assert_eq!(page_result(&mut h, c)["prompts"], json!([]));
        assert!(h.engine.list_page(h.now, Method::ToolsCall, None, &opts).is_err());
    }

    /// Over HTTP each tool page teaches the `x-mcp-header` table without forgetting the other
    /// pages' tools, and a tool breaking the rules leaves the page, cursor and hints kept.
    #[test]
    fn one_page_tool_listings_merge_the_header_table_and_drop_bad_tools() {
        let mut h = Harness::ready_http();
        let opts = CallOptions::default();
        let header = |name: &str| {
            json!({"name": name, "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"}}}})
        };
        let bad = json!({"name": "bad", "inputSchema": {"type": "object", "properties": {
            "x": {"type": "object", "x-mcp-header": "X"}}}});
        let c = h.engine.list_page(h.now, Method::ToolsList, None, &opts).unwrap();
        let sent = h.sent_one();
        h.reply(
            &sent,
            json!({"resultType": "complete", "tools": [header("a")], "nextCursor": "2"}),
        );
        page_result(&mut h, c);
        let c = h.engine.list_page(h.now, Method::ToolsList, Some("2"), &opts).unwrap();
        let sent = h.sent_one();
        h.reply(
            &sent,
            json!({"resultType": "complete", "tools": [bad, header("b")], "nextCursor": "3",
                "ttlMs": 7}),
        );
        let page = page_result(&mut h, c);
        assert_eq!(page["tools"], json!([header("b")]), "the bad tool is dropped");
        assert_eq!((page["nextCursor"].clone(), page["ttlMs"].clone()), (json!("3"), json!(7)));
        for tool in ["a", "b"] {
            h.call(tool, r#"{"region":"eu"}"#);
            let call = h.sent_one();
            let route = h.routes[&crate::engine::tests::wire(&call).get()].clone();
            assert_eq!(route.params, [("Mcp-Param-Region".to_owned(), b"eu".to_vec())], "{tool}");
        }
    }

    /// A slot gives back the room a large page grew its listing buffer to, once the listing
    /// is over: one-page listings put the page's copy back whatever its size, and a walk that
    /// failed after gathering pages (a repeated cursor here) kept them all.
    #[test]
    fn a_large_listing_leaves_no_room_held_in_its_slot() {
        let mut h = Harness::ready_http();
        let opts = CallOptions::default();
        let tools: Vec<Value> =
            (0..4000).map(|i| json!({"name": format!("tool-{i:05}"), "inputSchema": {}})).collect();
        let c = h.engine.list_page(h.now, Method::ToolsList, None, &opts).unwrap();
        let sent = h.sent_one();
        h.reply(&sent, json!({"resultType": "complete", "tools": tools}));
        page_result(&mut h, c);
        let room = h.engine.requests.largest_listing_room();
        assert!(room <= super::LISTING_BUF_KEEP, "{room}");
        let c = h.engine.list(h.now, Method::ToolsList, &opts).unwrap();
        for _ in 0..2 {
            let sent = h.sent_one();
            h.reply(&sent, json!({"resultType": "complete", "tools": tools, "nextCursor": "same"}));
        }
        assert!(h.events().iter().any(|e| e.starts_with(&format!("failed {}", c.get()))));
        let room = h.engine.requests.largest_listing_room();
        assert!(room <= super::LISTING_BUF_KEEP, "{room}");
    }

    /// A walk of one-page tool listings ends by forgetting the tools none of its pages named:
    /// a server that renames its tools at every listing does not grow the header table (nor
    /// keep a gone tool's read-only class) for the engine's life. A walk read from its middle
    /// forgets nothing.
    #[test]
    fn a_one_page_walk_forgets_the_tools_it_did_not_name() {
        let mut h = Harness::ready_http();
        let opts = CallOptions::default();
        let tool = |name: &str| {
            json!({"name": name, "annotations": {"readOnlyHint": true},
                "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"}}}})
        };
        let page = |h: &mut Harness, cursor: Option<&str>, tools: Value, next: Option<&str>| {
            let c = h.engine.list_page(h.now, Method::ToolsList, cursor, &opts).unwrap();
            let sent = h.sent_one();
            let mut result = json!({"resultType": "complete", "tools": tools});
            if let Some(next) = next {
                result["nextCursor"] = json!(next);
            }
            h.reply(&sent, result);
            page_result(h, c);
        };
        let known = |h: &Harness, name: &str| {
            (
                h.engine.tool_headers.class_of(name).is_some(),
                h.engine.tool_headers.tools_with_headers(),
            )
        };
        page(&mut h, None, json!([tool("t-1")]), Some("2"));
        page(&mut h, Some("2"), json!([tool("u-1")]), None);
        assert_eq!(known(&h, "t-1"), (true, 2));
        // The next walk names other tools: the first walk's are gone at its end, not before.
        page(&mut h, None, json!([tool("t-2")]), Some("2"));
        assert_eq!(known(&h, "t-1"), (true, 3), "a walk under way forgets nothing");
        page(&mut h, Some("2"), json!([tool("u-2")]), None);
        assert_eq!(known(&h, "t-1"), (false, 2));
        assert_eq!(known(&h, "u-2"), (true, 2));
        h.call("t-1", r#"{"region":"eu"}"#);
        let call = h.sent_one();
        let route = h.routes[&crate::engine::tests::wire(&call).get()].clone();
        assert!(route.params.is_empty(), "a tool gone has no headers: {:?}", route.params);
        // A last page whose walk started elsewhere (no first page read here) sweeps nothing.
        page(&mut h, Some("9"), json!([tool("v")]), None);
        assert_eq!(known(&h, "u-2"), (true, 3));
    }

    /// Issue 10: "a call already in flight keeps the definition it started with (its
    /// idempotency hint, x-mcp-header rules) even if the catalog changes under it". The tool
    /// is read-only with a `Region` header when the call starts; a new listing then makes it
    /// a write with a `Zone` header. The call's retry after a lost connection still goes (a
    /// write would not be retried) with `Mcp-Param-Region`; a call started after the change
    /// follows the new definition.
    #[test]
    fn a_call_in_flight_keeps_the_definition_it_started_with() {
        use crate::engine::tests::wire;
        use crate::engine::ExchangeFailure;
        use crate::error::TransportError;
        let mut h = Harness::ready_http();
        let list = |h: &mut Harness, tool: Value| {
            let c = h.engine.list_page(h.now, Method::ToolsList, None, &CallOptions::default());
            let sent = h.sent_one();
            h.reply(&sent, json!({"resultType": "complete", "tools": [tool]}));
            page_result(h, c.unwrap());
        };
        let schema = |header: &str| {
            json!({"type": "object", "properties": {
                "where": {"type": "string", "x-mcp-header": header}}})
        };
        let v1 = json!({"name": "t", "inputSchema": schema("Region"),
            "annotations": {"readOnlyHint": true}});
        let v2 = json!({"name": "t", "inputSchema": schema("Zone")});
        let route = |h: &Harness, frame: &Value| h.routes[&wire(frame).get()].params.clone();
        let lost = || ExchangeFailure::Transport(TransportError::ConnectionLost);
        list(&mut h, v1);
        let old = h.call("t", r#"{"where":"eu"}"#);
        let first = h.sent_one();
        assert_eq!(route(&h, &first), [("Mcp-Param-Region".to_owned(), b"eu".to_vec())]);
        list(&mut h, v2);
        h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&first), lost()));
        assert!(h.events().is_empty(), "a read is retried: {:?}", h.events());
        h.advance_to_next_timeout();
        let again = h.sent_one();
        assert_eq!(again["params"]["name"], "t");
        assert_eq!(route(&h, &again), [("Mcp-Param-Region".to_owned(), b"eu".to_vec())]);
        h.reply(&again, json!({"resultType": "complete", "content": []}));
        let events = h.events();
        assert!(events.len() == 1 && events[0].starts_with(&format!("done {} ", old.get())));
        // A call started after the change: the new header, and as a write it is not retried.
        let new = h.call("t", r#"{"where":"eu"}"#);
        let sent = h.sent_one();
        assert_eq!(route(&h, &sent), [("Mcp-Param-Zone".to_owned(), b"eu".to_vec())]);
        h.engine.handle_transport(h.now, TransportEvent::exchange_failed(wire(&sent), lost()));
        assert_eq!(h.events(), [format!("failed {} delivery_unknown", new.get())]);
    }
}
