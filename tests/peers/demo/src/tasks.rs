//! `--tasks`: the 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`), spec-exact on
//! the wire, on one tool, `slow_task(ms)`.
//!
//! `server/discover` declares the extension. A `tools/call` of `slow_task` whose request
//! declares the extension in its `_meta` client capabilities gets a `CreateTaskResult`
//! (`resultType: "task"`, flat task fields, `ttlMs`, `pollIntervalMs`); without the extension it
//! gets `-32003` naming the extension, as the extension says a server that can only serve the
//! call as a task must answer. `tasks/get` reports `working` (with `statusMessage`
//! `step i/n`, one step per 100 ms) until `ms` have passed, then `completed` with the tool
//! result inlined, or `cancelled` after `tasks/cancel`; an unknown id is `-32602`. With
//! `"ask": true` the task stops half-way in `input_required`, asking for a name under the key
//! `name` (a form elicitation), until `tasks/update` brings it; the result then names it. Tasks are
//! kept for the process's life, so over HTTP they outlive a client's connection or restart.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use crate::jsonrpc::{meta, RpcError};
use crate::slow::SLOW_MAX_MS;
use crate::tools::text_result;

pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/tasks";
const POLL_INTERVAL_MS: u64 = 200;
const TTL_MS: u64 = 600_000;
const STEP_MS: u64 = 100;

struct Task {
    id: String,
    ms: u64,
    started: Instant,
    created_at: String,
    cancelled: bool,
    /// `"ask": true`: the name asked for half-way, once given.
    ask: bool,
    name: Option<String>,
    /// When the name came: the rest of the work starts then.
    resumed: Option<Instant>,
}

#[derive(Default)]
pub(crate) struct Tasks {
    tasks: Vec<Task>,
    made: u64,
}

impl Tasks {
    /// `tools/call` of `slow_task`: a task, for a request that declared the extension.
    pub(crate) fn create(
        &mut self,
        params: &Value,
        args: &Map<String, Value>,
    ) -> Result<Value, RpcError> {
        let declared = meta(params, "io.modelcontextprotocol/clientCapabilities")
            .and_then(|c| c.get("extensions"))
            .and_then(|e| e.get(EXTENSION))
            .is_some();
        if !declared {
            let data = json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}});
            return Err(RpcError::new(-32003, "Missing required client capability").with_data(data));
        }
        let ms = match args.get("ms").and_then(Value::as_u64) {
            Some(ms) if ms <= SLOW_MAX_MS => ms,
            _ => return Err(RpcError::invalid_params("slow_task needs an integer `ms`")),
        };
        self.made += 1;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let id = format!("{:016x}{:08x}{:08x}", nanos as u64, std::process::id(), self.made);
        let created_at = timestamp();
        let ask = args.get("ask").and_then(Value::as_bool).unwrap_or(false);
        let task = Task {
            id,
            ms,
            started: Instant::now(),
            created_at,
            cancelled: false,
            ask,
            name: None,
            resumed: None,
        };
        eprintln!("[task] created {} ms={ms}", task.id);
        let mut body = fields(&task, "working", None);
        body.insert("resultType".into(), json!("task"));
        self.tasks.push(task);
        Ok(Value::Object(body))
    }

    /// `tasks/get`.
    pub(crate) fn get(&self, params: &Value) -> Result<Value, RpcError> {
        let task = self.find(params)?;
        let ms = |i: Instant| u64::try_from(i.elapsed().as_millis()).unwrap_or(u64::MAX);
        // Time worked: up to half-way before the name (when one is asked), the rest after.
        let elapsed = match (task.ask, task.resumed) {
            (false, _) => ms(task.started),
            (true, None) => ms(task.started).min(task.ms / 2),
            (true, Some(at)) => task.ms / 2 + ms(at),
        };
        let body = if task.cancelled {
            fields(task, "cancelled", Some("cancelled by request"))
        } else if task.ask && task.name.is_none() && elapsed >= task.ms / 2 {
            let mut body = fields(task, "input_required", Some("waiting for a name"));
            let schema = json!({"type": "object", "properties": {"name": {"type": "string"}},
                                "required": ["name"]});
            body.insert(
                "inputRequests".into(),
                json!({"name": {"method": "elicitation/create", "params": {"mode": "form",
                    "message": "Your name?", "requestedSchema": schema}}}),
            );
            body
        } else if elapsed >= task.ms {
            let mut body = fields(task, "completed", None);
            let text = match &task.name {
                Some(name) => format!("slept {} ms for {name}", task.ms),
                None => format!("slept {} ms", task.ms),
            };
            body.insert("result".into(), text_result(&text));
            body
        } else {
            let steps = task.ms.div_ceil(STEP_MS).max(1);
            let step = (elapsed / STEP_MS + 1).min(steps);
            fields(task, "working", Some(&format!("step {step}/{steps}")))
        };
        Ok(Value::Object(body))
    }

    /// `tasks/cancel`: an empty acknowledgement; the task ends `cancelled` unless it finished.
    pub(crate) fn cancel(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = task_id(params)?;
        let task = self.tasks.iter_mut().find(|t| t.id == id);
        let task = task
            .ok_or_else(|| RpcError::invalid_params("Failed to retrieve task: Task not found"))?;
        let done = task.started.elapsed() >= Duration::from_millis(task.ms);
        if !done && !task.cancelled {
            task.cancelled = true;
            eprintln!("[task] cancelled {id}");
        }
        Ok(json!({}))
    }

    /// `tasks/update`: takes the name under `inputResponses.name`; keys it did not ask are
    /// ignored, as the extension says.
    pub(crate) fn update(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = task_id(params)?;
        let task = self.tasks.iter_mut().find(|t| t.id == id);
        let task = task
            .ok_or_else(|| RpcError::invalid_params("Failed to retrieve task: Task not found"))?;
        let answer = &params["inputResponses"]["name"];
        let name = answer["content"]["name"].as_str();
        if task.ask && task.name.is_none() && answer["action"] == "accept" {
            if let Some(name) = name {
                eprintln!("[task] {id} got a name");
                task.name = Some(name.to_owned());
                task.resumed = Some(Instant::now());
            }
        }
        Ok(json!({}))
    }

    fn find(&self, params: &Value) -> Result<&Task, RpcError> {
        let id = task_id(params)?;
        let task = self.tasks.iter().find(|t| t.id == id);
        task.ok_or_else(|| RpcError::invalid_params("Failed to retrieve task: Task not found"))
    }
}

fn task_id(params: &Value) -> Result<&str, RpcError> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("tasks/* needs a string `taskId`"))
}

fn fields(task: &Task, status: &str, message: Option<&str>) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("taskId".into(), json!(task.id));
    body.insert("status".into(), json!(status));
    if let Some(m) = message {
        body.insert("statusMessage".into(), json!(m));
    }
    body.insert("createdAt".into(), json!(task.created_at));
    body.insert("lastUpdatedAt".into(), json!(timestamp()));
    body.insert("ttlMs".into(), json!(TTL_MS));
    body.insert("pollIntervalMs".into(), json!(POLL_INTERVAL_MS));
    body
}

/// Now as an ISO 8601 UTC timestamp (seconds), from the civil-from-days algorithm.
fn timestamp() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
}
