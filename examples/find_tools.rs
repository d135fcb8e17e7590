// cargo run --example find_tools -- "CMD ARGS..." "what the model wants to do" [K]
//
//! Progressive tool discovery: instead of handing a model every tool a server offers, a host
//! hands it one small `find_tools` tool. When the model calls it with a query, the host answers
//! from its local index (`Host::search_tools`) and expands only the chosen definitions
//! (`Host::tool`, a cache read). This example prints both: the `find_tools` definition a model
//! would see, and what one call of it returns, as JSON.

use std::time::Duration;

use mcpoll::{Config, Host, StdioCommand};
use serde_json::{json, Value};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: find_tools \"CMD ARGS...\" QUERY [K]";
    let command = args.next().ok_or(usage)?;
    let query = args.next().ok_or(usage)?;
    let k: usize = args.next().map(|k| k.parse()).transpose()?.unwrap_or(3);

    let mut host = Host::new()?;
    let server =
        host.add_stdio_server(StdioCommand::from_command_line(&command)?, Config::default())?;
    // One listing fills the cache and the search index.
    let total = host.tool_catalog_blocking(server, Duration::from_secs(30))?.len();

    // What the model sees instead of `total` tool definitions.
    let find_tools = json!({
        "name": "find_tools",
        "description": format!("Search {total} tools by what you want to do; returns the best matches."),
        "inputSchema": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "k": {"type": "integer", "minimum": 1}},
            "required": ["query"]
        }
    });

    // The model called find_tools {"query": QUERY, "k": K}: rank, then expand the chosen few.
    let chosen: Vec<(String, f64)> = host
        .search_tools(server, &query, k)
        .into_iter()
        .map(|(name, score)| (name.to_owned(), score))
        .collect();
    let mut tools = Vec::new();
    for (name, score) in chosen {
        let definition: Value = match host.tool(server, &name) {
            Some(json) => serde_json::from_str(json)?,
            // Not cacheable (`ttlMs: 0`): read it from a fresh listing instead.
            None => {
                match host.tool_catalog_blocking(server, Duration::from_secs(30))?.definition(&name)
                {
                    Some(json) => serde_json::from_str(json)?,
                    None => continue,
                }
            }
        };
        tools.push(json!({"score": score, "definition": definition}));
    }
    let out = json!({"find_tools": find_tools, "answer": {"query": query, "tools": tools}});
    println!("{}", serde_json::to_string_pretty(&out)?);
    host.close_server(server);
    Ok(())
}
