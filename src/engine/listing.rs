//! Listings: gathering pages behind `nextCursor`, and the re-listing a header mismatch asks for.

use std::time::Instant;

use smallvec::SmallVec;

use super::*;

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
        let bufs = self.requests.bufs_mut(slot);
        if !inner.is_empty() {
            if !bufs.items.is_empty() {
                bufs.items.push(b',');
            }
            bufs.items.extend_from_slice(inner.as_bytes());
        }
        let Some(cursor) = next_cursor else {
            // The last page: an empty cursor is a valid cursor, only absence ends the list.
            let mut items = std::mem::take(&mut self.requests.bufs_mut(slot).items);
            if key == "tools" {
                let mut array = Vec::with_capacity(items.len() + 2);
                array.push(b'[');
                array.extend_from_slice(&items);
                array.push(b']');
                let enforce = self.transport == TransportKind::Http;
                if let Some(kept) = self.tool_headers.learn(&array, enforce) {
                    items = kept;
                }
            }
            self.finish(now, slot, Ended::Answered, Outcome::Listing { key, items: &items });
            self.requests.bufs_mut(slot).items = items;
            return;
        };
        let hash = cursor_hash(&cursor);
        if bufs.cursors.contains(&hash) {
            return fail(self, PeerError::CursorRepeated.into());
        }
        bufs.cursors.push(hash);
        bufs.params.clear();
        bufs.params.extend_from_slice(b"\"cursor\":");
        write_json_str(&mut bufs.params, &cursor);
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
            match self.request(now, Method::ToolsList, &CallOptions::default(), None, |_, _| {}) {
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
            let mut params = Vec::with_capacity(bufs.params.len() + 2);
            params.push(b'{');
            params.extend_from_slice(&bufs.params);
            params.push(b'}');
            let arguments =
                crate::proto::json::parse(&params).ok().and_then(|p| p.get("arguments"));
            let name = std::mem::take(&mut bufs.name);
            let mut headers = std::mem::take(&mut bufs.param_headers);
            headers.clear();
            if let Some(a) = arguments {
                self.tool_headers.write_for_call(&name, a.text(), &mut headers);
            }
            let bufs = self.requests.bufs_mut(slot);
            bufs.name = name;
            bufs.param_headers = headers;
            if let Some(id) = self.requests.renew_wire_id(slot) {
                self.send_queue.push_front(id);
            }
        }
    }
}

pub(super) fn cursor_hash(cursor: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    cursor.hash(&mut h);
    h.finish()
}
