//! Object stores that die at a PUT: that request and every later one fail, as if the shipper's
//! process had been killed there (an S3 PUT either completes or leaves nothing). [`DiesAtPut`]
//! dies at its k-th PUT, [`DiesAfterSeal`] at the first PUT after a sealed manifest segment's:
//! the head that would have named it.

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

#[derive(Debug)]
pub struct DiesAtPut {
    pub inner: Arc<dyn ObjectStore>,
    pub puts: AtomicUsize,
    /// 1-based number of the first PUT that fails.
    pub dies_at: usize,
}

impl fmt::Display for DiesAtPut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DiesAtPut({})", self.inner)
    }
}

fn killed() -> object_store::Error {
    object_store::Error::Generic { store: "DiesAtPut", source: "the shipper was killed here".into() }
}

#[async_trait]
impl ObjectStore for DiesAtPut {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        if self.puts.fetch_add(1, Ordering::SeqCst) + 1 >= self.dies_at {
            return Err(killed());
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        if self.puts.fetch_add(1, Ordering::SeqCst) + 1 >= self.dies_at {
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

/// Dies at the first PUT after one under `manifest/` (a sealed segment): the segment is in the
/// bucket, the head naming it never is.
#[derive(Debug)]
pub struct DiesAfterSeal {
    pub inner: Arc<dyn ObjectStore>,
    pub sealed: AtomicBool,
}

impl fmt::Display for DiesAfterSeal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DiesAfterSeal({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for DiesAfterSeal {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        if self.sealed.load(Ordering::SeqCst) {
            return Err(killed());
        }
        let got = self.inner.put_opts(location, payload, opts).await;
        if location.parts().any(|p| p.as_ref() == "manifest") {
            self.sealed.store(true, Ordering::SeqCst);
        }
        got
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        if self.sealed.load(Ordering::SeqCst) {
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
