//! A small blocking client for the service (plain HTTP): what the tests and the load test drive
//! it with. Every call answers the status and body; transport failures are errors.

use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;

pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub headers: Vec<(String, String)>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    /// The error code of an error reply ("" if none).
    pub fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or("").to_string()
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

impl Client {
    pub fn new(addr: SocketAddr, token: Option<&str>) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(120)))
            .build()
            .into();
        Client { agent, base: format!("http://{addr}"), token: token.map(str::to_string) }
    }

    pub fn with_token(&self, token: Option<&str>) -> Client {
        Client { agent: self.agent.clone(), base: self.base.clone(), token: token.map(str::to_string) }
    }

    pub fn send(&self, method: &str, path: &str, ctype: &str, body: Vec<u8>) -> Result<Reply, String> {
        let mut b = ureq::http::Request::builder().method(method).uri(format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        if !ctype.is_empty() {
            b = b.header("content-type", ctype);
        }
        let req = b.body(body).map_err(|e| e.to_string())?;
        let mut resp = self.agent.run(req).map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let headers =
            resp.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())).collect();
        let body = resp.body_mut().with_config().limit(1 << 30).read_to_vec().map_err(|e| e.to_string())?;
        Ok(Reply { status, body, headers })
    }

    pub fn get(&self, path: &str) -> Result<Reply, String> {
        self.send("GET", path, "", Vec::new())
    }

    pub fn delete(&self, path: &str) -> Result<Reply, String> {
        self.send("DELETE", path, "", Vec::new())
    }

    pub fn post_json(&self, path: &str, v: &Value) -> Result<Reply, String> {
        self.send("POST", path, "application/json", v.to_string().into_bytes())
    }

    /// Opens a session, answering its id.
    pub fn open_session(&self) -> Result<u64, String> {
        let r = self.send("POST", "/v1/sessions", "", Vec::new())?;
        r.json()["id"]
            .as_u64()
            .ok_or_else(|| format!("open session: {} {}", r.status, String::from_utf8_lossy(&r.body)))
    }

    /// Uploads raw bytes of `dtype` and `shape`, answering the tensor id.
    pub fn upload_raw(&self, session: u64, dtype: &str, shape: &[usize], bytes: Vec<u8>) -> Result<u64, String> {
        let shape = shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",");
        let path = format!("/v1/sessions/{session}/tensors?dtype={dtype}&shape={shape}");
        let r = self.send("POST", &path, "application/octet-stream", bytes)?;
        r.json()["id"].as_u64().ok_or_else(|| format!("upload: {} {}", r.status, String::from_utf8_lossy(&r.body)))
    }
}
