//! Listings: gathering pages behind `nextCursor`, and the re-listing a header mismatch asks for.

use std::time::Instant;

use smallvec::SmallVec;

use super::ending::Outcome;
use super::requests::{Ended, SendState};
use super::{CallOptions, Engine, TransportKind};
use crate::error::{CallError, LocalError, PeerError};
use crate::proto::json::{Kind, RawJson};
use crate::proto::jsonrpc::write_json_str;
use crate::proto::mcp::{self, Method, ResultType};

impl Engine {
    /// One page of a listing: gather its items, then ask for the next page or finish.
    pub(super) fn on_page(&mut self, now: Instant, slot: usize, key: &str, result: RawJson<'_>) {
        let fail = |this: &mut Self, e: CallError| {
            this.finish(now, slot, Ended::Answered, Outcome::Failed(e));
        };
        if result.kind() != Kind::Object || mcp::result_type(result) != Some(ResultType::Complete) {
            return fail(self, PeerError::InvalidResult.into());
        }
        let inner = match result.get(key) {
            Some(a) if a.kind() == Kind::Array => {
                let t = a.text();
                t.get(1..t.len() - 1).unwrap_or_default().trim()
            }
            Some(_) => return fail(self, PeerError::InvalidResult.into()),
            None => "",
        };
        // `nextCursor: null` is taken as absent, like a missing member.
        let next_cursor = result.get("nextCursor").filter(|c| !c.is_null());
        let next_cursor = match next_cursor.map(RawJson::as_str) {
            Some(None) => return fail(self, PeerError::InvalidResult.into()),
            Some(Some(c)) => Some(c),
            None => None,
        };
        if self.requests.get(slot).is_some_and(|p| p.one_page) {
            return self.finish_one_page(now, slot, key, result, inner, next_cursor.is_some());
        }
        let bufs = self.requests.bufs_mut(slot);
        let more = bufs.more();
        more.list_hints.add(result);
        if !inner.is_empty() {
            if more.items.len().saturating_add(inner.len() + 1) > self.config.max_listing_bytes {
                // Freed, not only cleared: the pages so far may be most of the cap.
                more.items = Vec::new();
                self.stats.too_large += 1;
                return fail(self, PeerError::TooLarge.into());
            }
            // The items are gathered as a JSON array (`[` first, `]` added at the end), so
            // the tool-header table reads them in place rather than from a copy.
            more.items.push(if more.items.is_empty() { b'[' } else { b',' });
            more.items.extend_from_slice(inner.as_bytes());
        }
        let Some(cursor) = next_cursor else {
            // The last page: an empty cursor is a valid cursor, only absence ends the list.
            let mut array = std::mem::take(&mut self.requests.bufs_mut(slot).more().items);
            let mut kept = None;
            if !array.is_empty() {
                array.push(b']');
                if key == "tools" {
                    let enforce = self.transport == TransportKind::Http;
                    kept = self.tool_headers.learn(&array, enforce);
                }
            } else if key == "tools" {
                let enforce = self.transport == TransportKind::Http;
                kept = self.tool_headers.learn(b"[]", enforce);
            }
            let items = match &kept {
                Some(kept) => kept.as_slice(),
                None => array.get(1..array.len().saturating_sub(1)).unwrap_or_default(),
            };
            let hints = self.requests.bufs_mut(slot).more().list_hints;
            let listing = Outcome::Listing { key, items, hints };
            self.finish(now, slot, Ended::Answered, listing);
            // The buffer is kept for the slot's next listing, unless a large one grew it: the
            // result is in the event queue now, and a second copy would stay for nothing.
            if array.capacity() <= LISTING_BUF_KEEP {
                array.clear();
                self.requests.bufs_mut(slot).more().items = array;
            }
            return;
        };
        let hash = cursor_hash(&cursor);
        if bufs.more().cursors.contains(&hash) {
            return fail(self, PeerError::CursorRepeated.into());
        }
        bufs.more().cursors.push(hash);
        bufs.truncate_params(0);
        let params = bufs.params_buf().0;
        params.extend_from_slice(b"\"cursor\":");
        write_json_str(params, &cursor);
        let pages = self.requests.get_mut(slot).map(|p| {
            p.pages += 1;
            p.pages
        });
        if pages.unwrap_or(0) as usize >= self.config.max_pages {
            return fail(self, LocalError::TooManyPages.into());
        }
        if let Some(id) = self.requests.renew_wire_id(slot) {
            self.send_queue.push_front(id);
        }
    }

    /// A one-page listing ([`Engine::list_page`]) ends with the page as the server sent it. A
    /// tool page also teaches the `x-mcp-header` table (merged: the other pages' tools keep
    /// theirs), and over HTTP a tool breaking those rules is left out of the page handed on.
    fn finish_one_page(
        &mut self,
        now: Instant,
        slot: usize,
        key: &str,
        result: RawJson<'_>,
        inner: &str,
        has_next: bool,
    ) {
        if key != "tools" {
            return self.finish(now, slot, Ended::Answered, done(result.text()));
        }
        let mut array = std::mem::take(&mut self.requests.bufs_mut(slot).more().items);
        array.clear();
        array.push(b'[');
        array.extend_from_slice(inner.as_bytes());
        array.push(b']');
        let enforce = self.transport == TransportKind::Http;
        let Some(kept) = self.tool_headers.learn_page(&array, enforce) else {
            self.requests.bufs_mut(slot).more().items = array;
            return self.finish(now, slot, Ended::Answered, done(result.text()));
        };
        // Rebuilt without the dropped tools; the cursor and the cache hints go along.
        let mut hints = ListHints::default();
        hints.add(result);
        let mut json = String::with_capacity(kept.len() + 64);
        json.push_str("{\"tools\":[");
        json.push_str(std::str::from_utf8(&kept).unwrap_or_default());
        json.push(']');
        if let Some(c) = result.get("nextCursor").filter(|_| has_next) {
            json.push_str(",\"nextCursor\":");
            json.push_str(c.text());
        }
        hints.write(&mut json);
        json.push('}');
        self.requests.bufs_mut(slot).more().items = array;
        self.finish(now, slot, Ended::Answered, done(&json));
    }

    /// HTTP -32020: the server says the call's `Mcp-Param-*` headers are missing or wrong, so
    /// the tool list this engine knows is stale or absent. The spec asks to re-fetch
    /// `tools/list` and retry: the call waits (once) for a fresh listing. Returns `false` when
    /// that does not apply and the error should end the call.
    pub(super) fn park_for_relist(&mut self, now: Instant, slot: usize) -> bool {
        let Some(p) = self.requests.get_mut(slot) else { return false };
        if self.transport != super::TransportKind::Http
            || p.method != Method::ToolsCall
            || p.relisted
        {
            return false;
        }
        p.relisted = true;
        self.requests.set_state(slot, SendState::Parked);
        if self.refresh.is_none() {
            match self.request(now, Method::ToolsList, &CallOptions::default(), None, "", |_| {}) {
                Ok(call) => {
                    let refresh = call.0.slot();
                    if let Some(r) = self.requests.get_mut(refresh) {
                        r.internal = true;
                    }
                    self.refresh = Some(refresh);
                }
                Err(e) => {
                    log::debug!("cannot refresh the tool list: {e}");
                    self.unpark(now, false);
                }
            }
        }
        true
    }

    /// The refresh ended: parked calls go again with headers from the fresh listing, or end
    /// with the header mismatch when the listing failed.
    pub(super) fn unpark(&mut self, now: Instant, listed: bool) {
        let parked: SmallVec<[usize; 8]> = self
            .requests
            .iter()
            .filter(|(_, p)| p.state == SendState::Parked)
            .map(|(s, _)| s)
            .collect();
        for slot in parked {
            if !listed {
                let e = crate::error::RpcError {
                    code: crate::error::RpcError::HEADER_MISMATCH,
                    message: "header mismatch, and re-listing the tools failed".into(),
                    data: None,
                };
                self.finish(now, slot, Ended::Abandoned, Outcome::Failed(CallError::Protocol(e)));
                continue;
            }
            let bufs = self.requests.bufs_mut(slot);
            let mut params = Vec::with_capacity(bufs.params_len() + 2);
            params.push(b'{');
            params.extend_from_slice(bufs.params());
            params.push(b'}');
            let arguments =
                crate::proto::json::parse(&params).ok().and_then(|p| p.get("arguments"));
            let mut headers = std::mem::take(&mut bufs.param_headers);
            headers.clear();
            if let Some(a) = arguments {
                self.tool_headers.write_for_call(bufs.name(), a.text(), &mut headers);
            }
            self.requests.bufs_mut(slot).param_headers = headers;
            if let Some(id) = self.requests.renew_wire_id(slot) {
                self.send_queue.push_front(id);
            }
        }
    }
}

/// The cache hints of a listing's pages, combined for the one joined result: the shortest
/// valid `ttlMs` of any page, and `cacheScope: "public"` only when every page said so. (A page
/// without a valid `ttlMs` does not shorten it: a listing with none at all carries none.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ListHints {
    pages: u32,
    ttl_ms: Option<u64>,
    public_pages: u32,
}

impl ListHints {
    fn add(&mut self, page: RawJson<'_>) {
        self.pages += 1;
        if let Some(ttl) = page.get("ttlMs").and_then(RawJson::as_u64) {
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
const LISTING_BUF_KEEP: usize = 64 * 1024;

/// A page handed on whole: a complete result.
fn done(json: &str) -> Outcome<'_> {
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

    use crate::engine::tests::{discover_result, Harness};
    use crate::{CallOptions, Config, Event, Method, TransportEvent, TransportKind};

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
        assert_eq!(r["ttlMs"], 100);
        assert!(r.get("cacheScope").is_none(), "one private page makes it private: {r}");
        // Malformed or missing ttls do not count; none at all gives none.
        let r = joined([json!({"ttlMs": -1}), json!({"ttlMs": 1.5}), json!({})]);
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
        let mut h = Harness::new(Config::default());
        h.engine.handle_transport(h.now, TransportEvent::opened_as(TransportKind::Http));
        let probe = h.sent_one();
        h.reply(&probe, discover_result());
        h.events();
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
        let mut h = Harness::new(Config::default());
        h.engine.handle_transport(h.now, TransportEvent::opened_as(TransportKind::Http));
        let probe = h.sent_one();
        h.reply(&probe, discover_result());
        h.events();
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
