//! Feed servers on loopback for the tests.
//!
//! `FeedServer::hyades` runs the real Hyades service in-process on a snapshot directory.
//! `FeedServer::garbage` is a minimal stand-in speaking the same `recordSubscribe` protocol that
//! precedes every record with messages a broken server might send (not JSON, a notification
//! without a document, a document whose readable fields lie), to show they are only counted.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aldb_format::records::RecordLogReader;
use aldb_verify::record_json::attested_record_to_json_value;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message;

pub enum Inner {
    Hyades(hyades::Service),
    Garbage(tokio::task::JoinHandle<()>),
}

pub struct FeedServer {
    pub dir: PathBuf,
    pub addr: SocketAddr,
    inner: Option<Inner>,
}

impl FeedServer {
    /// The real Hyades on `dir`, at `addr` (port 0: an ephemeral one).
    pub async fn hyades(dir: &Path, addr: SocketAddr) -> Self {
        let config = hyades::Config {
            addr,
            metrics_addr: None,
            poll_interval: Duration::from_millis(10),
            record_poll_interval: Duration::from_millis(10),
            ..hyades::Config::new(dir)
        };
        let service = hyades::Service::start(config).await.unwrap();
        Self { dir: dir.to_path_buf(), addr: service.local_addr(), inner: Some(Inner::Hyades(service)) }
    }

    /// A feed server for `dir`: the real Hyades.
    pub async fn start(dir: &Path, addr: SocketAddr) -> Self {
        Self::hyades(dir, addr).await
    }

    /// The broken stand-in on `dir`.
    pub async fn garbage(dir: &Path, addr: SocketAddr) -> Self {
        Self::standin(dir, addr, true).await
    }

    /// A stand-in speaking the feed protocol; with `garbage`, every record comes only in broken
    /// forms.
    pub async fn standin(dir: &Path, addr: SocketAddr, garbage: bool) -> Self {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let d = dir.to_path_buf();
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                conns.spawn(serve_standin(tcp, d.clone(), garbage));
            }
        });
        Self { dir: dir.to_path_buf(), addr, inner: Some(Inner::Garbage(task)) }
    }

    pub fn url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }

    /// Stops the server (its connections close).
    pub async fn stop(&mut self) {
        match self.inner.take() {
            Some(Inner::Hyades(s)) => s.shutdown().await,
            Some(Inner::Garbage(t)) => {
                // Aborting the accept task drops the JoinSet, which aborts every connection.
                t.abort();
                let _ = t.await;
            }
            None => {}
        }
    }
}

async fn serve_standin(tcp: tokio::net::TcpStream, dir: PathBuf, garbage: bool) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else { return };
    let from = loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
                let from = v["params"][0]["fromSlot"].as_u64().unwrap_or(0);
                let _ = ws.send(Message::text(json!({"jsonrpc": "2.0", "id": v["id"], "result": 1}).to_string())).await;
                break from;
            }
            Some(Ok(_)) => continue,
            _ => return,
        }
    };
    let mut reader = RecordLogReader::new(&dir);
    loop {
        let Ok(fresh) = tokio::task::block_in_place(|| reader.refresh()) else { return };
        for r in fresh.into_iter().filter(|r| r.record.slot >= from) {
            let mut doc = attested_record_to_json_value(&r.record, &r.attestations);
            let note = |result: Value| {
                json!({"jsonrpc": "2.0", "method": "recordNotification", "params": {"subscription": 1, "result": result}}).to_string()
            };
            if !garbage {
                if ws.send(Message::text(note(doc))).await.is_err() {
                    return;
                }
                continue;
            }
            let mut lie = doc.clone();
            lie["stateRoot"] = json!("11111111111111111111111111111111");
            for m in [
                "{not json".to_string(),
                json!({"jsonrpc": "2.0", "method": "recordNotification"}).to_string(),
                note(lie),
            ] {
                if ws.send(Message::text(m)).await.is_err() {
                    return;
                }
            }
            doc["bytes"] = json!("AAAA");
            if ws.send(Message::text(note(doc))).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
