//! Differential: the hand-written URL parser of the HTTP driver against the `url` crate
//! (WHATWG URL Standard). Where both accept a URL they must name the same scheme, host, port
//! and request target; a URL ours accepts, `url` must accept too; and any canonical
//! `http(s)` URL with a plain host (letters, digits, `-`, `.`, `_`, or an IP literal) that
//! `url` serializes, ours must accept and read the same way (port 0 aside: ours refuses it,
//! as nothing can be connected to there).
#![no_main]

use std::net::{Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use mcpoll::internal::fuzzing::{http_url, ParsedUrl};
use url::{Host, Url};

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    match (http_url(input), Url::parse(input)) {
        (Ok(ours), Ok(theirs)) => same(input, &ours, &theirs),
        (Ok(ours), Err(e)) => {
            // `url` checks punycode labels (`xn--`), which ours passes on as written.
            if !ours.host.split('.').any(|l| l.starts_with("xn--")) {
                panic!("ours accepts {input:?} as {ours:?}; url refuses it: {e}");
            }
        }
        (Err(_), Ok(theirs)) => canonical_accepted(&theirs),
        (Err(_), Err(_)) => {}
    }
});

fn same(input: &str, ours: &ParsedUrl, theirs: &Url) {
    let scheme = if ours.https { "https" } else { "http" };
    assert_eq!(theirs.scheme(), scheme, "{input:?}");
    assert_eq!(theirs.port_or_known_default(), Some(ours.port), "{input:?}");
    match theirs.host() {
        Some(Host::Domain(d)) => assert_eq!(d, ours.host, "{input:?}"),
        Some(Host::Ipv4(a)) => assert_eq!(ours.host.parse::<Ipv4Addr>(), Ok(a), "{input:?}"),
        Some(Host::Ipv6(a)) => assert_eq!(ours.host.parse::<Ipv6Addr>(), Ok(a), "{input:?}"),
        None => panic!("url has no host for {input:?}, ours {ours:?}"),
    }
    // `url` percent-encodes some characters and removes dot segments; ours sends the target
    // as written. Compare the targets where neither can apply.
    let plain = ours
        .target
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&()*+,;=:@/?".contains(&b));
    let path = ours.target.split('?').next().unwrap_or_default();
    let dots = path.split('/').any(|seg| seg == "." || seg == "..");
    if plain && !dots {
        let mut target = theirs.path().to_owned();
        if let Some(q) = theirs.query() {
            target.push('?');
            target.push_str(q);
        }
        assert_eq!(target, ours.target, "{input:?}");
    }
}

fn canonical_accepted(theirs: &Url) {
    if !matches!(theirs.scheme(), "http" | "https")
        || !theirs.username().is_empty()
        || theirs.password().is_some()
        || theirs.port() == Some(0)
    {
        return;
    }
    let plain_host = match theirs.host() {
        Some(Host::Domain(d)) => {
            !d.is_empty()
                && d.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
                && !d.split('.').any(|l| l.starts_with("xn--"))
        }
        Some(Host::Ipv4(_) | Host::Ipv6(_)) => true,
        None => false,
    };
    if !plain_host {
        return;
    }
    let canonical = theirs.as_str();
    match http_url(canonical) {
        Ok(ours) => same(canonical, &ours, theirs),
        Err(e) => panic!("ours refuses the canonical URL {canonical:?}: {e}"),
    }
}
