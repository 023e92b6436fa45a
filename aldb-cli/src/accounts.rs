//! Reading account files: one JSON object per line.

use std::io::BufRead;

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use serde::Deserialize;

/// One line of an account file, as written by hand or exported from RPC.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    pubkey: String,
    lamports: u64,
    owner: String,
    executable: bool,
    data: String,
}

/// An account read from a file, owning its data.
pub(crate) struct OwnedAccount {
    pub(crate) pubkey: [u8; 32],
    pub(crate) lamports: u64,
    pub(crate) owner: [u8; 32],
    pub(crate) executable: bool,
    pub(crate) data: Vec<u8>,
}

impl OwnedAccount {
    pub(crate) fn as_ref(&self) -> aldb_core::AccountRef<'_> {
        aldb_core::AccountRef {
            pubkey: &self.pubkey,
            lamports: self.lamports,
            owner: &self.owner,
            executable: self.executable,
            data: &self.data,
        }
    }
}

/// Decodes a base58 string that must hold exactly 32 bytes (a pubkey or a hash).
pub(crate) fn decode_key(field: &str, text: &str) -> Result<[u8; 32]> {
    let bytes = bs58::decode(text).into_vec().with_context(|| format!("{field} is not base58: {text:?}"))?;
    match <[u8; 32]>::try_from(bytes.as_slice()) {
        Ok(k) => Ok(k),
        Err(_) => bail!("{field} must decode to 32 bytes, got {}: {text:?}", bytes.len()),
    }
}

fn parse_line(text: &str) -> Result<OwnedAccount> {
    let l: Line = serde_json::from_str(text).context("not a valid account object")?;
    Ok(OwnedAccount {
        pubkey: decode_key("pubkey", &l.pubkey)?,
        lamports: l.lamports,
        owner: decode_key("owner", &l.owner)?,
        executable: l.executable,
        data: base64::engine::general_purpose::STANDARD
            .decode(l.data.as_bytes())
            .context("data is not base64")?,
    })
}

/// Reads accounts in chunks of `chunk` lines, handing each chunk to `sink` in file order.
/// Blank lines are skipped; any other bad line stops with an error naming it.
pub(crate) fn read_chunks(
    reader: impl BufRead,
    chunk: usize,
    mut sink: impl FnMut(&[OwnedAccount]),
) -> Result<u64> {
    let mut buf = Vec::with_capacity(chunk);
    let mut count = 0u64;
    for (i, line) in reader.lines().enumerate() {
        let n = i + 1;
        let line = line.with_context(|| format!("line {n}: cannot read"))?;
        if line.trim().is_empty() {
            continue;
        }
        buf.push(parse_line(&line).with_context(|| format!("line {n}"))?);
        count += 1;
        if buf.len() == chunk {
            sink(&buf);
            buf.clear();
        }
    }
    if !buf.is_empty() {
        sink(&buf);
    }
    Ok(count)
}
