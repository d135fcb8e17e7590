//! The ledger: what the tools remember, and how many calls of each tool arrived, kept across
//! restarts in the `--state-file`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use serde_json::{json, Map, Value};

use crate::tools::{text_result, tool_error};

/// What the tools remember (`write_note`'s notes, `put`'s map, `charge`'s charges) and what
/// tests read back through `stats`: how many calls of each tool arrived. With `--state-file`
/// every delivery is also appended to a file, one line each (`TOOL`, or `charge<TAB>KEY` for a
/// keyed charge), and the file is replayed at startup, so the totals survive a crash and a
/// restart, and a test can read them without asking the server.
#[derive(Default)]
pub(crate) struct Ledger {
    notes: Vec<String>,
    store: BTreeMap<String, String>,
    deliveries: BTreeMap<String, u64>,
    /// Deliveries of `charge` per idempotency key.
    charge_keys: BTreeMap<String, u64>,
    charged_keys: BTreeSet<String>,
    unkeyed_charges: u64,
    state_file: Option<File>,
}

impl Ledger {
    pub(crate) fn open(path: Option<&Path>) -> Result<Ledger, String> {
        let mut ledger = Ledger::default();
        let Some(path) = path else { return Ok(ledger) };
        let failed = |e: io::Error| format!("state file {}: {e}", path.display());
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(failed(e)),
        };
        text.lines().for_each(|line| ledger.replay(line));
        let mut file = OpenOptions::new().create(true).append(true).open(path).map_err(failed)?;
        if !text.is_empty() && !text.ends_with('\n') {
            // A line cut short must not swallow the next one.
            file.write_all(b"\n").map_err(failed)?;
        }
        ledger.state_file = Some(file);
        let total: u64 = ledger.deliveries.values().sum();
        eprintln!("[demo] state file {}: {total} earlier deliveries", path.display());
        Ok(ledger)
    }

    /// Counts one line of the state file. A restarted process cannot tell a charge that ran
    /// from one a crash cut short, so every delivered charge counts as charged.
    fn replay(&mut self, line: &str) {
        let (tool, key) = match line.split_once('\t') {
            Some((tool, key)) => (tool, Some(key)),
            None => (line, None),
        };
        if tool.is_empty() {
            return;
        }
        self.count(tool, key);
        if tool == "charge" {
            match key {
                Some(key) => {
                    self.charged_keys.insert(key.to_owned());
                }
                None => self.unkeyed_charges += 1,
            }
        }
    }

    /// Counts one call of `tool` in memory; returns the calls of `tool` so far.
    fn count(&mut self, tool: &str, key: Option<&str>) -> u64 {
        if let Some(key) = key {
            *self.charge_keys.entry(key.to_owned()).or_default() += 1;
        }
        let calls = self.deliveries.entry(tool.to_owned()).or_default();
        *calls += 1;
        *calls
    }

    /// Counts one received call, in memory and in the state file; returns the calls of `tool`
    /// so far, this one included.
    pub(crate) fn record_delivery(&mut self, tool: &str, key: Option<&str>) -> u64 {
        let calls = self.count(tool, key);
        if let Some(file) = &mut self.state_file {
            let line = match key {
                Some(key) => format!("{tool}\t{key}\n"),
                None => format!("{tool}\n"),
            };
            // One unbuffered write per line: a crash right after it still leaves the line whole.
            if let Err(e) = file.write_all(line.as_bytes()) {
                eprintln!("[demo] state file write failed: {e}");
            }
        }
        calls
    }

    pub(crate) fn write_note(&mut self, args: &Map<String, Value>) -> Value {
        let Some(note) = args.get("note").and_then(Value::as_str) else {
            return tool_error("write_note needs a string `note`");
        };
        self.notes.push(note.to_owned());
        text_result(&self.notes.len().to_string())
    }

    pub(crate) fn stats(&self) -> Value {
        let stats = json!({"deliveries": self.deliveries, "chargeKeys": self.charge_keys});
        json!({
            "content": [{"type": "text", "text": stats.to_string()}],
            "structuredContent": stats,
            "isError": false,
        })
    }

    /// Idempotent: storing the same value again leaves the same state.
    pub(crate) fn put(&mut self, args: &Map<String, Value>) -> Value {
        let (Some(key), Some(value)) =
            (args.get("key").and_then(Value::as_str), args.get("value").and_then(Value::as_str))
        else {
            return tool_error("put needs strings `key` and `value`");
        };
        self.store.insert(key.to_owned(), value.to_owned());
        json!({
            "content": [{"type": "text", "text": "ok"}],
            "structuredContent": {"keys": self.store.len()},
            "isError": false,
        })
    }

    /// Not idempotent: every call without a key charges again, while a key is charged once.
    pub(crate) fn charge(&mut self, args: &Map<String, Value>) -> Value {
        if !args.get("amount").is_some_and(Value::is_number) {
            return tool_error("charge needs a number `amount`");
        }
        let charged = match args.get("idempotency_key") {
            None | Some(Value::Null) => {
                self.unkeyed_charges += 1;
                true
            }
            Some(Value::String(key)) if is_valid_key(key) => self.charged_keys.insert(key.clone()),
            Some(_) => {
                return tool_error(
                    "`idempotency_key` must be a non-empty string without control characters",
                );
            }
        };
        let keys = self.charged_keys.len() as u64;
        let charges = keys + self.unkeyed_charges;
        json!({
            "content": [{"type": "text", "text": charges.to_string()}],
            "structuredContent": {"charged": charged, "charges": charges, "keys": keys},
            "isError": false,
        })
    }
}

/// A key fits on one line of the state file, after a tab.
pub(crate) fn is_valid_key(key: &str) -> bool {
    !key.is_empty() && !key.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_file_survives_a_restart_and_a_line_cut_short() {
        let path = std::env::temp_dir().join(format!("mcpoll-demo-ledger-{}", std::process::id()));
        // A crash mid-write left `ad` without its newline.
        fs::write(&path, "add\ncharge\tk1\ncharge\nad").unwrap();
        let mut ledger = Ledger::open(Some(&path)).unwrap();
        assert_eq!(ledger.record_delivery("add", None), 2);
        drop(ledger);
        let mut restarted = Ledger::open(Some(&path)).unwrap();
        let counts = |l: &Ledger, tool: &str| l.deliveries.get(tool).copied();
        assert_eq!(counts(&restarted, "add"), Some(2), "the cut line did not swallow `add`");
        assert_eq!(counts(&restarted, "ad"), Some(1));
        assert_eq!(counts(&restarted, "charge"), Some(2));
        // k1 was charged before the restart: not again. One key and one unkeyed charge in all.
        let args = json!({"amount": 1, "idempotency_key": "k1"});
        let result = restarted.charge(args.as_object().unwrap());
        assert_eq!(result["structuredContent"], json!({"charged": false, "charges": 2, "keys": 1}));
        fs::remove_file(&path).unwrap();
    }
}
