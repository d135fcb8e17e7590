//! `include/mcpoll.h` is written by hand; this keeps it current: it declares exactly the
//! exported functions, every `mcpoll_result` value, every event kind and constant, and the
//! fields of `mcpoll_event` in their Rust order.

use std::collections::BTreeSet;
use std::path::Path;

use mcpoll_capi::mcpoll_result;

fn header() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("include/mcpoll.h"))
        .expect("read include/mcpoll.h")
}

fn sources() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("src") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("read source");
            out.push((path.display().to_string(), text));
        }
    }
    out
}

/// The identifier that starts `s` (`[A-Za-z0-9_]*`).
fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The header with its comments removed.
fn header_code() -> String {
    let h = header();
    let mut out = String::new();
    let mut rest = h.as_str();
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        let j = rest[i..].find("*/").expect("comment closed");
        rest = &rest[i + j + 2..];
    }
    out.push_str(rest);
    out
}

#[test]
fn every_exported_function_is_declared_and_nothing_else() {
    let mut exported = BTreeSet::new();
    for (_, text) in sources() {
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if line.trim() != "#[no_mangle]" {
                continue;
            }
            let def = lines.next().expect("an item after #[no_mangle]");
            let at = def.find("fn ").unwrap_or_else(|| panic!("not a function: {def}"));
            exported.insert(ident(&def[at + 3..]).to_owned());
        }
    }
    let code = header_code();
    let mut declared = BTreeSet::new();
    for (i, _) in code.match_indices("mcpoll_") {
        let name = ident(&code[i..]);
        let after = code[i + name.len()..].trim_start();
        // A declaration: `name(` not preceded by `(*` (the callback typedef).
        if after.starts_with('(') && !code[..i].ends_with("(*") {
            declared.insert(name.to_owned());
        }
    }
    assert!(exported.len() > 30, "found only {exported:?}");
    assert_eq!(exported, declared, "exported (left) and declared in mcpoll.h (right) differ");
}

#[test]
fn every_result_value_is_in_the_header() {
    let code = header_code();
    let start = code.find("typedef enum mcpoll_result {").expect("the result enum");
    let body = &code[start..start + code[start..].find('}').expect("enum end")];
    let mut in_header = 0;
    for line in body.lines().skip(1) {
        if line.trim().starts_with("MCPOLL_") {
            in_header += 1;
        }
    }
    for &r in mcpoll_result::ALL {
        let name = r.name().to_str().unwrap();
        let want = format!("{name} = {}", r as u32);
        assert!(
            body.contains(&format!("{want},")) || body.contains(&format!("{want}\n")),
            "{want}"
        );
    }
    assert_eq!(in_header, mcpoll_result::ALL.len(), "values in the header but not in Rust");
}

#[test]
fn event_kinds_and_constants_match() {
    let code = header_code();
    let mut checked = 0;
    for (file, text) in sources() {
        for line in text.lines() {
            let t = line.trim();
            // `MCPOLL_EVENT_X = N,` (the event kind enum) and `pub const MCPOLL_X: u32 = N;`.
            if let Some(rest) = t.strip_prefix("pub const MCPOLL_") {
                let name = format!("MCPOLL_{}", ident(rest));
                let value = t.rsplit("= ").next().unwrap().trim_end_matches(';');
                assert!(
                    code.contains(&format!("#define {name} {value}\n"))
                        || code.contains(&format!("#define {name} {value} ")),
                    "{file}: {name} = {value} missing from the header"
                );
                checked += 1;
            } else if t.starts_with("MCPOLL_EVENT_") && t.contains(" = ") {
                let want = t.trim_end_matches(',');
                assert!(code.contains(want), "{file}: {want} missing from the header");
                checked += 1;
            }
        }
    }
    assert!(checked >= 27, "only {checked} kinds and constants found");
}

#[test]
fn event_fields_are_in_rust_order() {
    let rust: Vec<String> = {
        let (_, text) = sources().into_iter().find(|(f, _)| f.ends_with("event.rs")).unwrap();
        let start = text.find("pub struct mcpoll_event {").unwrap();
        let body = &text[start..start + text[start..].find("\n}").unwrap()];
        body.lines()
            .filter_map(|l| l.trim().strip_prefix("pub "))
            .filter(|l| !l.starts_with("struct"))
            .map(|l| ident(l).to_owned())
            .collect()
    };
    let code = header_code();
    let start = code.find("typedef struct mcpoll_event {").unwrap();
    let body = &code[start..start + code[start..].find('}').unwrap()];
    let header: Vec<String> = body
        .lines()
        .skip(1)
        .filter_map(|l| l.trim().strip_suffix(';'))
        .map(|l| l.rsplit([' ', '*']).next().unwrap().to_owned())
        .collect();
    assert_eq!(rust, header);
    assert_eq!(rust.len(), 19);
}
