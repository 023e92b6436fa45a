//! An object store that dies at a PUT: that request and every later one fail, as if the
//! shipper's process had been killed there (an S3 PUT either completes or leaves nothing).
//! [`DiesAt::put`] dies at its k-th PUT, [`DiesAt::after_seal`] at the first PUT after a sealed
//! manifest segment's: the head that would have named it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions,
    PutPayload, PutResult, Result,
};

/// Where the store dies.
#[derive(Debug, Clone, Copy)]
enum Rule {
    /// At this 1-based PUT.
    Put(usize),
    /// At the first PUT after one under `manifest/`.
    AfterSeal,
}

#[derive(Debug)]
pub struct DiesAt {
    inner: Arc<dyn ObjectStore>,
    rule: Rule,
    /// PUTs asked for so far (multipart uploads count as one).
    pub puts: AtomicUsize,
    dead: AtomicBool,
}

impl DiesAt {
    /// Dies at its `dies_at`-th PUT (1-based); `usize::MAX` only counts.
    pub fn put(inner: Arc<dyn ObjectStore>, dies_at: usize) -> Self {
        Self { inner, rule: Rule::Put(dies_at), puts: AtomicUsize::new(0), dead: AtomicBool::new(false) }
    }

    /// Dies at the first PUT after a sealed manifest segment's.
    pub fn after_seal(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner, rule: Rule::AfterSeal, puts: AtomicUsize::new(0), dead: AtomicBool::new(false) }
    }

    /// Counts a PUT to `location`; whether it fails.
    fn dies(&self, location: &Path) -> bool {
        let n = self.puts.fetch_add(1, Ordering::SeqCst) + 1;
        match self.rule {
            Rule::Put(k) => n >= k,
            Rule::AfterSeal => {
                if self.dead.load(Ordering::SeqCst) {
                    return true;
                }
                if location.parts().any(|p| p.as_ref() == "manifest") {
                    self.dead.store(true, Ordering::SeqCst);
                }
                false
            }
        }
    }
}

impl fmt::Display for DiesAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DiesAt({:?}, {})", self.rule, self.inner)
    }
}

fn killed() -> object_store::Error {
    object_store::Error::Generic { store: "DiesAt", source: "the shipper was killed here".into() }
}

#[async_trait]
impl ObjectStore for DiesAt {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        if self.dies(location) {
            return Err(killed());
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        if self.dies(location) {
            return Err(killed());
        }
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn delete(&self, location: &Path) -> Result<()> {
        self.inner.delete(location).await
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.copy(from, to).await
    }

    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.copy_if_not_exists(from, to).await
    }
}
