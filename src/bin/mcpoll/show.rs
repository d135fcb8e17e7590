//! The readable form of each result (the default; `--json` prints the JSON instead).
//!
//! Anything of a shape not recognised is printed as indented JSON, so nothing is ever lost.

use std::borrow::Cow;
use std::fmt::Write;

use serde_json::Value;

/// The widest a listing's name column is padded to: a longer name is printed as it is, and
/// does not pad every other line to its length (one 60 KB name padded a listing of 100,000
/// tools to gigabytes; past 65,535 the padding panicked).
const MAX_COLUMN: usize = 40;

/// `text` safe to write to a terminal: control characters (escape sequences that move the
/// cursor, clear the screen, set the title or the clipboard; a lone carriage return that
/// overwrites a line) and the bidirectional overrides that reorder what is shown are written
/// as `\u{..}` escapes. Line feeds and tabs stay when `lines` (multi-line text) allows them.
/// A server names its tools and writes their descriptions: what it sends is shown, not obeyed.
pub(crate) fn terminal_safe(text: &str, lines: bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && !(lines && matches!(c, '\n' | '\t')))
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.contains(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The readable text for the result of `command`, ending in a newline.
pub(crate) fn readable(command: &str, result: &Value) -> String {
    let mut out = String::new();
    match command {
        "discover" => discover(&mut out, result),
        "tools" | "resources" | "templates" => {
            out = readable_listing(command, &result.to_string()).unwrap_or_default();
        }
        "prompts" => prompts(&mut out, result),
        "call" => call(&mut out, result),
        "read" => read(&mut out, result),
        "get" | "prompt" => prompt(&mut out, result),
        _ => {}
    }
    if out.is_empty() {
        pretty(&mut out, result);
    }
    terminal_safe(&out, true).into_owned()
}

fn pretty(out: &mut String, v: &Value) {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    let _ = writeln!(out, "{text}");
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The first line of a description, for one-line listings.
fn first_line(v: &Value) -> &str {
    str_of(v, "description").and_then(|d| d.lines().next()).unwrap_or("")
}

fn discover(out: &mut String, r: &Value) {
    // 2025-11-25 puts the identity in `serverInfo`; 2026-07-28 in `_meta`.
    let info = r
        .get("serverInfo")
        .or_else(|| r.get("_meta").and_then(|m| m.get("io.modelcontextprotocol/serverInfo")));
    if let Some(info) = info {
        let name = str_of(info, "name").unwrap_or("?");
        let _ = writeln!(out, "server:       {name} {}", str_of(info, "version").unwrap_or(""));
    }
    if let Some(v) = str_of(r, "protocolVersion") {
        let _ = writeln!(out, "protocol:     {v}");
    }
    if let Some(vs) = r.get("supportedVersions").and_then(Value::as_array) {
        let vs: Vec<&str> = vs.iter().filter_map(Value::as_str).collect();
        let _ = writeln!(out, "versions:     {}", vs.join(", "));
    }
    if let Some(caps) = r.get("capabilities").and_then(Value::as_object) {
        let names: Vec<&str> = caps.keys().map(String::as_str).collect();
        let _ = writeln!(out, "capabilities: {}", names.join(", "));
    }
    if let Some(i) = str_of(r, "instructions") {
        let _ = writeln!(out, "instructions:\n{i}");
    }
}

/// The readable text of a listing (`tools`, `resources`, `templates`), read straight from the
/// result's JSON text; `None` for another command or a result of another shape. A listing may
/// hold 100,000 items, and a `serde_json::Value` of it takes about ten times its text.
pub(crate) fn readable_listing(command: &str, text: &str) -> Option<String> {
    use mcpoll::internal::{parse_json, Kind, RawJson};
    fn text_of<'a>(item: RawJson<'a>, key: &str) -> Option<std::borrow::Cow<'a, str>> {
        item.get(key).and_then(RawJson::as_str)
    }
    let (key, id) = match command {
        "tools" => ("tools", "name"),
        "resources" => ("resources", "uri"),
        "templates" => ("resourceTemplates", "uriTemplate"),
        _ => return None,
    };
    let items = parse_json(text)?.get(key).filter(|a| a.kind() == Kind::Array)?;
    let names = items.elements().filter_map(|i| text_of(i, id));
    let width = names.map(|s| s.chars().count()).filter(|&n| n <= MAX_COLUMN).max();
    let mut out = String::new();
    for item in items.elements() {
        let name = text_of(item, id);
        let description = text_of(item, "description");
        let first = description.as_deref().and_then(|d| d.lines().next()).unwrap_or("");
        let read_only = item
            .get("annotations")
            .and_then(|a| a.get("readOnlyHint"))
            .and_then(RawJson::as_bool)
            .unwrap_or(false);
        let mark = if read_only { " (read-only)" } else { "" };
        let name = terminal_safe(name.as_deref().unwrap_or("?"), false);
        let first = terminal_safe(first, false);
        let width = width.unwrap_or(0);
        let line = format!("{name:width$}  {first}{mark}");
        let _ = writeln!(out, "{}", line.trim_end());
    }
    if items.elements().next().is_none() {
        let _ = writeln!(out, "(no {key})");
    }
    Some(out)
}

fn prompts(out: &mut String, r: &Value) {
    let Some(items) = r.get("prompts").and_then(Value::as_array) else { return };
    for p in items {
        let args: Vec<String> = p
            .get("arguments")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|a| {
                        let n = str_of(a, "name")?;
                        let required = a.get("required").and_then(Value::as_bool) == Some(true);
                        Some(if required { format!("{n}*") } else { n.to_owned() })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let name = str_of(p, "name").unwrap_or("?");
        let _ = writeln!(out, "{name}({})  {}", args.join(", "), first_line(p));
    }
    if items.is_empty() {
        out.push_str("(no prompts)\n");
    }
}

/// One content block (text, image, audio, resource, resource link).
fn content(out: &mut String, c: &Value) {
    match str_of(c, "type") {
        Some("text") => {
            let _ = writeln!(out, "{}", str_of(c, "text").unwrap_or(""));
        }
        Some(kind @ ("image" | "audio")) => {
            let bytes = str_of(c, "data").map_or(0, |d| d.len() / 4 * 3);
            let mime = str_of(c, "mimeType").unwrap_or("?");
            let _ = writeln!(out, "[{kind} {mime}, about {bytes} bytes]");
        }
        Some("resource") => {
            if let Some(r) = c.get("resource") {
                resource_contents(out, r);
            }
        }
        Some("resource_link") => {
            let _ = writeln!(out, "[link {}]", str_of(c, "uri").unwrap_or("?"));
        }
        _ => pretty(out, c),
    }
}

fn resource_contents(out: &mut String, r: &Value) {
    let uri = str_of(r, "uri").unwrap_or("?");
    match (str_of(r, "text"), str_of(r, "blob")) {
        (Some(t), _) => {
            let _ = writeln!(out, "{t}");
        }
        (None, Some(b)) => {
            let mime = str_of(r, "mimeType").unwrap_or("?");
            let _ = writeln!(out, "[{uri}: {mime}, about {} bytes]", b.len() / 4 * 3);
        }
        (None, None) => {
            let _ = writeln!(out, "[{uri}]");
        }
    }
}

fn call(out: &mut String, r: &Value) {
    let blocks = r.get("content").and_then(Value::as_array);
    for c in blocks.into_iter().flatten() {
        content(out, c);
    }
    // Structured output is the result proper when there is no text for it.
    if let Some(s) = r.get("structuredContent").filter(|_| blocks.is_none_or(Vec::is_empty)) {
        pretty(out, s);
    }
    if r.get("isError").and_then(Value::as_bool) == Some(true) {
        out.insert_str(0, "the tool reported an error:\n");
    }
}

fn read(out: &mut String, r: &Value) {
    for c in r.get("contents").and_then(Value::as_array).into_iter().flatten() {
        resource_contents(out, c);
    }
}

fn prompt(out: &mut String, r: &Value) {
    if let Some(d) = str_of(r, "description") {
        let _ = writeln!(out, "# {d}");
    }
    for m in r.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let _ = write!(out, "{}: ", str_of(m, "role").unwrap_or("?"));
        match m.get("content") {
            Some(c) => content(out, c),
            None => out.push('\n'),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{readable, readable_listing, terminal_safe};

    #[test]
    fn shapes() {
        let tools = json!({"tools": [
            {"name": "echo", "description": "Echo.\nMore.", "annotations": {"readOnlyHint": true}},
            {"name": "add"}
        ]});
        assert_eq!(readable("tools", &tools), "echo  Echo. (read-only)\nadd\n");
        let result = json!({"content": [{"type": "text", "text": "hi"}], "isError": true});
        assert_eq!(readable("call", &result), "the tool reported an error:\nhi\n");
        let structured = json!({"content": [], "structuredContent": {"sum": 3}});
        assert_eq!(readable("call", &structured), "{\n  \"sum\": 3\n}\n");
        let prompt =
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}]});
        assert_eq!(readable("get", &prompt), "user: Hi\n");
        let odd = json!({"x": 1});
        assert_eq!(readable("read", &odd), "{\n  \"x\": 1\n}\n");
    }

    /// A name far longer than the others is printed as it is: no line is padded to it (which
    /// made the listing hundreds of times its size, and panicked past 65,535 characters).
    #[test]
    fn a_very_long_name_pads_no_line() {
        let long = "u".repeat(70_000);
        let text = json!({"resources": [{"uri": long}]}).to_string();
        let shown = readable_listing("resources", &text).unwrap();
        assert_eq!(shown.trim_end(), long);
        let mut items = vec![json!({"uri": "u".repeat(60_000)})];
        items.extend((0..2_000).map(|i| json!({"uri": format!("r{i}"), "description": "d"})));
        let text = json!({ "resources": items }).to_string();
        let shown = readable_listing("resources", &text).unwrap();
        assert!(shown.len() < 4 * text.len(), "{} bytes for {}", shown.len(), text.len());
        assert!(shown.contains("\nr1     d\n"), "the short names still line up");
    }

    /// What a server sends is shown, not obeyed by the terminal: escape sequences, a lone
    /// carriage return, bidirectional overrides.
    #[test]
    fn server_text_cannot_drive_the_terminal() {
        let tools = json!({"tools": [
            {"name": "a\u{1b}]0;title\u{7}", "description": "\u{1b}[2J\rhidden"},
            {"name": "b\u{202e}txt.exe"}
        ]});
        let shown = readable("tools", &tools);
        assert!(!shown.contains(['\u{1b}', '\u{7}', '\r', '\u{202e}']), "{shown:?}");
        assert!(shown.contains("a\\u{1b}]0;title\\u{7}"), "{shown:?}");
        let discover = json!({"instructions": "line one\n\tline \u{9b}two"});
        let shown = readable("discover", &discover);
        assert_eq!(shown, "instructions:\nline one\n\tline \\u{9b}two\n");
        let call = json!({"content": [{"type": "text", "text": "ok\u{1b}[31m"}]});
        assert!(!readable("call", &call).contains('\u{1b}'));
        assert_eq!(terminal_safe("plain\ntext", false), "plain\\u{a}text");
    }
}
