//! HTTP/1.1 framing for the server side: reading a request, writing a response head and one
//! server-sent event as a chunk.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;

const MAX_HEAD_LINE: u64 = 16 * 1024;
const MAX_HEADERS: usize = 100;
const MAX_BODY: usize = 64 << 20;
pub(crate) const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                        Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
/// The last chunk of a chunked body: the event stream ends, the connection stays open.
pub(crate) const SSE_END: &[u8] = b"0\r\n\r\n";

/// One HTTP request; header names are lowercased.
pub(crate) struct HttpRequest {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl HttpRequest {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub(crate) fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    pub(crate) fn wants_close(&self) -> bool {
        self.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// Reads one request: `Ok(None)` when the client closed the connection between requests,
/// `Err` for anything this server will not parse (chunked request bodies included).
pub(crate) fn read_request(
    reader: &mut BufReader<TcpStream>,
) -> Result<Option<HttpRequest>, String> {
    let Some(request_line) = read_head_line(reader)? else { return Ok(None) };
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("malformed request line `{request_line}`"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(format!("unsupported version `{version}`"));
    }
    let mut headers = Vec::new();
    loop {
        let line = read_head_line(reader)?.ok_or("connection closed inside the head")?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').ok_or("malformed header line")?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        if headers.len() > MAX_HEADERS {
            return Err("too many headers".into());
        }
    }
    let mut request =
        HttpRequest { method: method.into(), target: target.into(), headers, body: Vec::new() };
    if request.header("transfer-encoding").is_some() {
        return Err("request bodies need Content-Length".into());
    }
    let length = match request.header("content-length") {
        None => 0,
        Some(length) => length.parse::<usize>().map_err(|_| "bad Content-Length")?,
    };
    if length > MAX_BODY {
        return Err(format!("body of {length} bytes is too large"));
    }
    request.body = vec![0; length];
    reader.read_exact(&mut request.body).map_err(|e| format!("body: {e}"))?;
    Ok(Some(request))
}

/// One line of the request head, without its CRLF; `None` at a clean end of the connection.
fn read_head_line(reader: &mut BufReader<TcpStream>) -> Result<Option<String>, String> {
    let mut line = Vec::new();
    let read = reader.by_ref().take(MAX_HEAD_LINE).read_until(b'\n', &mut line);
    match read {
        Ok(0) => return Ok(None),
        Ok(_) => {}
        Err(e) => return Err(e.to_string()),
    }
    if line.pop() != Some(b'\n') {
        return Err("head line too long or cut off".into());
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line).map(Some).map_err(|_| "head line is not UTF-8".into())
}

/// A response head with a Content-Length.
pub(crate) fn http_head(status: &str, headers: &[(&str, &str)], length: usize) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {length}\r\n");
    for (name, value) in headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// One server-sent event carrying `data`, framed as one chunk of a chunked body.
pub(crate) fn sse_chunk(data: &str) -> Vec<u8> {
    let event = format!("event: message\ndata: {data}\n\n");
    format!("{:x}\r\n{event}\r\n", event.len()).into_bytes()
}
