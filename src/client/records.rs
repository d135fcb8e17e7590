//! Call records at the host: each server's name, and the sink every record goes to.
//!
//! Engines put a record in every terminal event; the host hands it to the sink when the event
//! leaves the engine (through [`Host::poll_event`], the blocking helpers, or the capability
//! cache taking its own listings), with the server's name added. Listings the cache answers
//! without a request get a record of their own (`cache_hit`, `cache_age`). With no sink
//! installed this costs one branch per event.

use std::fmt;
use std::time::Duration;

use crate::engine::{CallRecord, Engine, Event, RecordSink};
use crate::proto::mcp::Method;

use super::{Client, ServerId};
#[cfg(doc)]
use crate::Host;

/// The host's sink and server names.
pub(crate) struct Records {
    sink: Option<Box<dyn RecordSink>>,
    /// Each server's names, by slab index (set when the server is added).
    names: Vec<Naming>,
}

/// What a server's records name it by: its name, and for a principal's lane the principal.
#[derive(Debug, Clone, Default)]
pub(crate) struct Naming {
    server: String,
    principal: Option<String>,
}

impl Naming {
    /// The bytes its names hold on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.server.capacity() + self.principal.as_ref().map_or(0, String::capacity)
    }

    fn of<'r, 'n>(&'n self, record: CallRecord<'r>) -> CallRecord<'n>
    where
        'r: 'n,
    {
        record.with_context(&self.server, self.principal.as_deref())
    }
}

impl fmt::Debug for Records {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Records")
            .field("sink", &self.sink.as_ref().map(|_| "..."))
            .field("names", &self.names)
            .finish()
    }
}

impl Records {
    pub(crate) fn new() -> Self {
        Self { sink: None, names: Vec::new() }
    }

    /// Names the server at `index` after its identity (program or URL), reduced to what is safe
    /// to print: a URL's host and port (never its path, query or user), a program's
    /// file name (never its arguments, which the identity does not hold anyway); and a
    /// principal's lane after its principal too.
    pub(crate) fn added(&mut self, index: usize, identity: &str, principal: Option<&str>) {
        self.set(index, default_name(identity));
        if let Some(n) = self.names.get_mut(index) {
            n.principal = principal.map(str::to_owned);
        }
    }

    fn set(&mut self, index: usize, name: &str) {
        if self.names.len() <= index {
            self.names.resize_with(index + 1, Naming::default);
        }
        if let Some(n) = self.names.get_mut(index) {
            n.server.clear();
            n.server.push_str(name);
        }
    }

    pub(crate) fn name(&self, index: usize) -> &str {
        self.names.get(index).map_or("", |n| n.server.as_str())
    }

    /// The names of the server at `index`, kept for its records after it is removed.
    pub(crate) fn naming(&self, index: usize) -> Naming {
        self.names.get(index).cloned().unwrap_or_default()
    }

    /// Hands the record of a terminal event to the sink, with the server's name.
    pub(crate) fn has_sink(&self) -> bool {
        self.sink.is_some()
    }

    pub(crate) fn event<C>(&mut self, index: usize, event: &Event<'_, C>) {
        let Some(sink) = self.sink.as_mut() else { return };
        if let Some(r) = event.record() {
            match self.names.get(index) {
                Some(naming) => sink.record(&naming.of(*r)),
                None => sink.record(&r.with_server("")),
            }
        }
    }

    /// [`event`](Self::event) of a removed server, under the names it had (its slot may hold
    /// another server by now).
    pub(crate) fn event_named<C>(&mut self, naming: &Naming, event: &Event<'_, C>) {
        let Some(sink) = self.sink.as_mut() else { return };
        if let Some(r) = event.record() {
            sink.record(&naming.of(*r));
        }
    }

    /// Records a listing the capability cache answered without a request.
    pub(crate) fn cache_hit(
        &mut self,
        index: usize,
        engine: &Engine,
        method: Method,
        age: Duration,
    ) {
        let Some(sink) = self.sink.as_mut() else { return };
        let record = engine.cache_hit_record(method, age);
        match self.names.get(index) {
            Some(naming) => sink.record(&naming.of(record)),
            None => sink.record(&record.with_server("")),
        }
    }
}

fn default_name(identity: &str) -> &str {
    // A stdio server's default identity is its program, then its arguments after NULs: the
    // arguments may hold secrets, so the name is the program's alone.
    let identity = identity.split('\0').next().unwrap_or(identity);
    if let Some((scheme, rest)) = identity.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        return if host.is_empty() { scheme } else { host };
    }
    std::path::Path::new(identity).file_name().and_then(|f| f.to_str()).unwrap_or(identity)
}

impl Client {
    /// Installs the sink that every call record goes to (replacing any earlier one, which is
    /// returned). Records reach it as calls' terminal events leave the engines: through
    /// [`poll_event`](Self::poll_event), the blocking helpers and the capability cache; and
    /// for each listing the cache answers itself. See [`CallRecord`].
    pub fn set_record_sink(&mut self, sink: Box<dyn RecordSink>) -> Option<Box<dyn RecordSink>> {
        self.records.sink.replace(sink)
    }

    /// Removes the record sink.
    pub fn take_record_sink(&mut self) -> Option<Box<dyn RecordSink>> {
        self.records.sink.take()
    }

    /// Names a server in its records (the default is its URL's `host:port`, or its program's
    /// file name). A name from a configuration file goes here.
    pub fn set_server_name(&mut self, server: ServerId, name: &str) {
        if self.server(server).is_some() {
            self.records.set(server.index, name);
        }
    }

    /// The server's name in its records.
    pub fn server_name(&self, server: ServerId) -> Option<&str> {
        self.server(server).map(|_| self.records.name(server.index))
    }
}

#[cfg(test)]
mod tests {
    use super::default_name;

    #[test]
    fn default_names_keep_no_path_query_or_user() {
        assert_eq!(default_name("http://127.0.0.1:8080/mcp?key=s3cret"), "127.0.0.1:8080");
        assert_eq!(default_name("https://user:pw@example.com/mcp"), "example.com");
        assert_eq!(default_name("https://[::1]:9/x#frag"), "[::1]:9");
        assert_eq!(default_name("/usr/local/bin/my-server"), "my-server");
        assert_eq!(default_name("my-server"), "my-server");
        assert_eq!(default_name("weird://"), "weird");
        assert_eq!(default_name("/usr/bin/node\0/srv/server.js\0--token=s3cret"), "node");
    }
}
