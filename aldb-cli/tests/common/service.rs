//! A real Hyades serving a snapshot directory on a loopback ephemeral port, and a dishonest
//! proxy in front of one.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;

use hyades::{Config, Service};
use serde_json::Value;

/// Hyades on its own runtime, shut down when dropped.
pub struct Hyades {
    rt: tokio::runtime::Runtime,
    service: Option<Service>,
    /// Where it answers JSON-RPC, `http://127.0.0.1:PORT/`.
    pub url: String,
}

impl Hyades {
    /// Serves `dir` (snapshot files, and the record and vote logs when there are any).
    pub fn start(dir: &Path) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let config = Config { addr: "127.0.0.1:0".parse().unwrap(), metrics_addr: None, ..Config::new(dir) };
        let service = rt.block_on(Service::start(config)).unwrap();
        let url = format!("http://{}/", service.local_addr());
        Self { rt, service: Some(service), url }
    }
}

impl Drop for Hyades {
    fn drop(&mut self) {
        if let Some(s) = self.service.take() {
            self.rt.block_on(s.shutdown());
        }
    }
}

/// A loopback HTTP server that forwards each JSON-RPC call to `upstream` and passes the answer
/// through `tamper` first: a dishonest service.
pub fn tampering_proxy(upstream: String, tamper: fn(&mut Value)) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            let mut resp = ureq::post(&upstream).header("content-type", "application/json").send(&body[..]).unwrap();
            let mut v: Value = serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
            tamper(&mut v);
            let out = v.to_string();
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                out.len()
            );
            stream.write_all(head.as_bytes()).unwrap();
            stream.write_all(out.as_bytes()).unwrap();
        }
    });
    format!("http://{addr}/")
}
