//! The request side of the loopback model endpoints the `tool_output` tests stand up.

use std::io::BufRead;

/// One HTTP/1.1 request as the endpoints read it.
pub struct Request {
    /// The request line, e.g. `POST /v1/chat/completions HTTP/1.1\r\n`.
    pub first: String,
    /// The `Authorization` header's value, if sent.
    pub authorization: Option<String>,
    /// `Content-Length` bytes of body.
    pub body: Vec<u8>,
}

impl Request {
    /// Whether this is the chat completions call (every other path gets a 404).
    pub fn is_chat(&self) -> bool {
        self.first.starts_with("POST /v1/chat/completions ")
    }
}

/// Reads one request; `None` when the connection ends before the headers do.
pub fn read_request(reader: &mut impl BufRead) -> Option<Request> {
    let mut first = String::new();
    let _ = reader.read_line(&mut first);
    let (mut length, mut authorization) = (0usize, None);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            } else if k.eq_ignore_ascii_case("authorization") {
                authorization = Some(v.trim().to_string());
            }
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    Some(Request {
        first,
        authorization,
        body,
    })
}
