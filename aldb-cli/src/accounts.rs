//! Reading account files: one JSON object per line.
//!
//! Everything in a file is outside input, so every read is bounded: a line longer than
//! [`MAX_LINE_BYTES`] is refused without being held, base58 longer than a key's longest encoding
//! is refused before decoding, and no error quotes more than an excerpt of the file.

use std::io::{BufRead, Read};

use aldb_verify::Excerpt;
use aldb_verify::base58::decode_fixed;
use anyhow::{Context, Result, bail};
use base64::Engine as _;
use serde::Deserialize;

/// The longest account line read: the largest Solana account (10 MiB of data, 13.4 MiB in
/// base64) with room for its other fields.
pub(crate) const MAX_LINE_BYTES: usize = 16 << 20;

/// How much of an error message about outside input is kept: parser messages can quote a field
/// name of any length.
const MAX_MESSAGE_CHARS: usize = 200;

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

/// Decodes a base58 string that must hold exactly 32 bytes (a pubkey or a hash). Text longer
/// than any such encoding is refused before decoding, and the error quotes only an excerpt.
pub(crate) fn decode_key(field: &str, text: &str) -> Result<[u8; 32]> {
    decode_fixed::<32>(text).map_err(|e| anyhow::anyhow!("{field} {} is not base58 of 32 bytes: {e}", Excerpt(text)))
}

/// `text` cut to its first `max` characters, marked when cut: for messages that may quote
/// outside input.
pub(crate) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
    }
}

fn parse_line(text: &str) -> Result<OwnedAccount> {
    let l: Line = serde_json::from_str(text)
        .map_err(|e| anyhow::anyhow!("not a valid account object: {}", cut(&e.to_string(), MAX_MESSAGE_CHARS)))?;
    Ok(OwnedAccount {
        pubkey: decode_key("pubkey", &l.pubkey)?,
        lamports: l.lamports,
        owner: decode_key("owner", &l.owner)?,
        executable: l.executable,
        data: base64::engine::general_purpose::STANDARD.decode(l.data.as_bytes()).context("data is not base64")?,
    })
}

/// Reads accounts in chunks of `chunk` lines, handing each chunk to `sink` in file order.
/// Blank lines are skipped; any other bad line stops with an error naming it.
pub(crate) fn read_chunks(reader: impl BufRead, chunk: usize, mut sink: impl FnMut(&[OwnedAccount])) -> Result<u64> {
    let mut reader = reader;
    let mut buf = Vec::with_capacity(chunk);
    let mut count = 0u64;
    let mut bytes = Vec::new();
    for n in 1usize.. {
        bytes.clear();
        // One byte past the cap shows an over-long line without reading the rest of it.
        let read = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut bytes)
            .with_context(|| format!("line {n}: cannot read"))?;
        if read == 0 {
            break;
        }
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        if bytes.len() > MAX_LINE_BYTES {
            bail!("line {n}: longer than {MAX_LINE_BYTES} bytes, the longest account line read");
        }
        let line = std::str::from_utf8(&bytes).map_err(|e| anyhow::anyhow!("line {n}: not UTF-8: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        buf.push(parse_line(line).with_context(|| format!("line {n}"))?);
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn line(pubkey: &str, owner: &str) -> String {
        format!(r#"{{"pubkey":"{pubkey}","lamports":5,"owner":"{owner}","executable":false,"data":"AQI="}}"#)
    }

    fn read(text: &[u8]) -> Result<Vec<[u8; 32]>> {
        let mut keys = Vec::new();
        read_chunks(text, 2, |c| keys.extend(c.iter().map(|a| a.pubkey)))?;
        Ok(keys)
    }

    #[test]
    fn good_lines_are_read_in_order() {
        let key = |b: u8| aldb_verify::hash_to_base58(&[b; 32]);
        let text = format!("{}\r\n\n{}\n{}", line(&key(1), &key(9)), line(&key(2), &key(9)), line(&key(3), &key(9)));
        assert_eq!(read(text.as_bytes()).unwrap(), [[1; 32], [2; 32], [3; 32]]);
    }

    #[test]
    fn a_million_digit_pubkey_is_refused_unread_with_a_short_message() {
        let good = aldb_verify::hash_to_base58(&[9; 32]);
        let huge = "2".repeat(1_000_000);
        for (pubkey, owner) in [(&huge, &good), (&good, &huge)] {
            let text = format!("{}\n{}\n", line(&good, &good), line(pubkey, owner));
            let e = format!("{:#}", read(text.as_bytes()).unwrap_err());
            assert!(e.starts_with("line 2: "), "{e}");
            assert!(e.contains("\"2222222222222222…\" (1000000 bytes)"), "{e}");
            assert!(e.contains("too long (at most 44"), "{e}");
            assert!(e.len() < 300, "{} bytes", e.len());
        }
    }

    #[test]
    fn over_long_lines_and_names_are_refused_with_short_messages() {
        let key = aldb_verify::hash_to_base58(&[1; 32]);
        // A line past the cap, of which only the cap is read.
        let mut text = line(&key, &key).into_bytes();
        text.push(b'\n');
        text.extend(std::iter::repeat_n(b' ', MAX_LINE_BYTES + 1));
        text.extend_from_slice(b"\n");
        let e = format!("{:#}", read(&text).unwrap_err());
        assert_eq!(e, format!("line 2: longer than {MAX_LINE_BYTES} bytes, the longest account line read"));
        // A line exactly at the cap is read.
        let mut at_cap = line(&key, &key);
        at_cap.extend(std::iter::repeat_n(' ', MAX_LINE_BYTES - at_cap.len()));
        assert_eq!(read(at_cap.as_bytes()).unwrap(), [[1; 32]]);
        // The parser quotes unknown field names; the message keeps an excerpt.
        let name = "x".repeat(1_000_000);
        let text = format!(r#"{{"{name}":1}}"#);
        let e = format!("{:#}", read(text.as_bytes()).unwrap_err());
        assert!(e.starts_with("line 1: not a valid account object: unknown field"), "{e}");
        assert!(e.len() < 300, "{} bytes", e.len());
    }
}
