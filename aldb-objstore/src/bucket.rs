//! Opening a bucket from an `s3://` URL: the one place the client is configured, shared by the
//! shipper, replicas and their command lines.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;

use crate::error::BucketError;

/// How to reach an S3-compatible service. Whatever is `None` comes from the standard
/// environment variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
/// `AWS_ENDPOINT`, ...), as the AWS tools read them.
#[derive(Clone, Debug, Default)]
pub struct BucketOptions {
    /// The service's URL, for anything but AWS itself (SeaweedFS, MinIO, Garage, Ceph).
    pub endpoint: Option<String>,
    /// The region (any name for most S3-compatible services).
    pub region: Option<String>,
    /// Access key id.
    pub access_key_id: Option<String>,
    /// Secret access key.
    pub secret_access_key: Option<String>,
    /// Allow plain HTTP to the endpoint (a service on loopback or a private network).
    pub allow_http: bool,
}

/// Splits `s3://BUCKET[/PREFIX]` into the bucket and the prefix (no leading or trailing `/`).
pub fn parse_url(url: &str) -> Result<(String, String), BucketError> {
    let bad = |reason: &str| BucketError::Url { url: url.to_string(), reason: reason.to_string() };
    let rest = url.strip_prefix("s3://").ok_or_else(|| bad("must start with s3://"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(bad("names no bucket"));
    }
    Ok((bucket.to_string(), prefix.trim_matches('/').to_string()))
}

/// A client for the bucket of `url` and the prefix under it. Requests are path-style
/// (`ENDPOINT/BUCKET/KEY`), which every S3-compatible service accepts.
pub fn open_bucket(url: &str, opts: &BucketOptions) -> Result<(Arc<dyn ObjectStore>, Path), BucketError> {
    let (bucket, prefix) = parse_url(url)?;
    let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket).with_virtual_hosted_style_request(false);
    if let Some(e) = &opts.endpoint {
        b = b.with_endpoint(e);
    }
    if let Some(r) = &opts.region {
        b = b.with_region(r);
    }
    if let Some(k) = &opts.access_key_id {
        b = b.with_access_key_id(k);
    }
    if let Some(s) = &opts.secret_access_key {
        b = b.with_secret_access_key(s);
    }
    if opts.allow_http {
        b = b.with_allow_http(true);
    }
    Ok((Arc::new(b.build()?), Path::from(prefix)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(parse_url("s3://b").unwrap(), ("b".into(), "".into()));
        assert_eq!(parse_url("s3://b/x/y/").unwrap(), ("b".into(), "x/y".into()));
        assert!(parse_url("http://b/x").is_err());
        assert!(parse_url("s3:///x").is_err());
    }
}
