//! What `aldb proof --url` trusts for a slot's root: a root the caller names, a root record
//! signed by a quorum of identities the caller names (`docs/SPEC.md` §9.4), or, only when asked
//! for in so many words, the service's own answer.

use std::io::Read;
use std::path::Path;

use aldb_verify::Hash;
use aldb_verify::json::hash_to_base58;
use aldb_verify::record::{Attestation, Commitment, Quorum};
use aldb_verify::record_json::{AttestedRecord, attested_record_from_json_value};
use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::accounts::{cut, decode_key};

/// The longest identities file read: 20 000 identities of 44 characters and a newline.
const MAX_IDENTITIES_FILE_BYTES: u64 = 1 << 20;

/// Attestations looked at per configured identity: an honest record has one; a second allows
/// for a server that lists a stale one first, and the cap keeps a hostile server that repeats
/// an identity's bad signature thousands of times from costing a verification each.
const ATTESTATIONS_PER_IDENTITY: usize = 2;

/// The message printed when no trust flag is given.
pub(crate) const CHOOSE: &str = "choose what the proof is checked against:\n  \
     --root R                             a state root you already trust for the slot\n  \
     --identities FILE --threshold K      the slot's root record, signed by at least K of the identities in FILE\n  \
     --trust-server                       the service's own root (it could be lying; says so on stderr)\n  \
     --trust votes --validators FILE      the validators' votes for the slot (getSlotVotes, or --evidence FILE; a chain with the aldb consensus patch)";

/// Where the trusted root of a slot comes from.
pub(crate) enum Trust {
    /// A root the caller already trusts.
    Root(Hash),
    /// A root record signed by a quorum, optionally of one cluster.
    Quorum { quorum: Quorum, identities: usize, genesis_hash: Option<Hash>, commitment: Option<Commitment> },
    /// The service's own `getStateRoot`: no independent check at all.
    Server,
}

/// How the root was established, for the report.
pub(crate) enum Basis {
    /// `--root`.
    Given,
    /// A quorum-signed record.
    Record {
        record_hash: Hash,
        commitment: Commitment,
        genesis_hash: Hash,
        signers: usize,
        threshold: usize,
        identities: usize,
    },
    /// `--trust-server`.
    Server,
}

impl Basis {
    /// One line saying why the root is believed.
    pub(crate) fn describe(&self) -> String {
        match self {
            Basis::Given => "root trusted: given with --root".to_string(),
            Basis::Record { record_hash, commitment, genesis_hash, signers, threshold, identities } => format!(
                "root trusted: record {} ({}, genesis {}) signed by {signers} of {identities} identities (need {threshold})",
                hash_to_base58(record_hash),
                commitment.name(),
                hash_to_base58(genesis_hash)
            ),
            Basis::Server => "root trusted: the service's own word (--trust-server)".to_string(),
        }
    }
}

/// Reads an identities file: either a JSON array of base58 public keys, or one key per line
/// (blank lines and `#` comments ignored). Repeats are refused later by the quorum rule.
pub(crate) fn read_identities(path: &Path) -> Result<Vec<[u8; 32]>> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_IDENTITIES_FILE_BYTES + 1).read_to_string(&mut text))
        .with_context(|| format!("cannot read the identities file {}", path.display()))?;
    if text.len() as u64 > MAX_IDENTITIES_FILE_BYTES {
        bail!("{} is longer than {MAX_IDENTITIES_FILE_BYTES} bytes, so not an identities file", path.display());
    }
    parse_identities(&text).with_context(|| format!("identities file {}", path.display()))
}

fn parse_identities(text: &str) -> Result<Vec<[u8; 32]>> {
    let keys: Vec<String> = if text.trim_start().starts_with('[') {
        let list: Vec<Value> = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("not a JSON array of base58 public keys: {}", cut(&e.to_string(), 200)))?;
        list.iter()
            .enumerate()
            .map(|(i, v)| v.as_str().map(str::to_string).with_context(|| format!("entry {i} is not a string")))
            .collect::<Result<_>>()?
    } else {
        text.lines()
            .map(|l| l.split('#').next().unwrap_or("").trim())
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    if keys.is_empty() {
        bail!("lists no identities");
    }
    keys.iter().enumerate().map(|(i, k)| decode_key(&format!("identity {}", i + 1), k)).collect()
}

impl Trust {
    /// The quorum rule of `identities` and `threshold`, with a clear error for a bad pair.
    pub(crate) fn quorum(
        identities: &[[u8; 32]],
        threshold: usize,
        genesis_hash: Option<Hash>,
        commitment: Option<Commitment>,
    ) -> Result<Self> {
        let quorum =
            Quorum::new(identities, threshold).map_err(|e| anyhow::anyhow!("--identities/--threshold: {e}"))?;
        Ok(Trust::Quorum { quorum, identities: identities.len(), genesis_hash, commitment })
    }
}

/// Checks a `getRootRecord` answer for `slot` against the quorum rule and returns the root it
/// attests, with the basis for the report.
pub(crate) fn check_record(
    doc: &Value,
    slot: u64,
    quorum: &Quorum,
    identities: usize,
    genesis_hash: Option<Hash>,
    commitment: Option<Commitment>,
) -> Result<(Hash, Basis)> {
    let AttestedRecord { record, record_hash, attestations } =
        attested_record_from_json_value(doc).context("getRootRecord: not a valid root record")?;
    if record.slot != slot {
        bail!("getRootRecord answered with the record of slot {}, not slot {slot}", record.slot);
    }
    if let Some(g) = genesis_hash
        && g != record.genesis_hash
    {
        bail!(
            "the record of slot {slot} is for genesis {}, not the expected {}",
            hash_to_base58(&record.genesis_hash),
            hash_to_base58(&g)
        );
    }
    // A finalized record satisfies a request for confirmed; not the other way round.
    if commitment == Some(Commitment::Finalized) && record.commitment != Commitment::Finalized {
        bail!("the record of slot {slot} is {}, not finalized (yet)", record.commitment.name());
    }
    let considered = trim(quorum, &attestations);
    let signers = quorum.count_valid(&record_hash, &considered);
    if signers < quorum.threshold() {
        bail!(
            "the record of slot {slot} ({}) is signed by {signers} of the {identities} identities, below the threshold {}",
            hash_to_base58(&record_hash),
            quorum.threshold()
        );
    }
    let basis = Basis::Record {
        record_hash,
        commitment: record.commitment,
        genesis_hash: record.genesis_hash,
        signers,
        threshold: quorum.threshold(),
        identities,
    };
    Ok((record.state_root, basis))
}

/// The attestations worth verifying: configured identities only, at most
/// [`ATTESTATIONS_PER_IDENTITY`] each.
fn trim(quorum: &Quorum, attestations: &[Attestation]) -> Vec<Attestation> {
    let mut seen: Vec<([u8; 32], usize)> = Vec::new();
    let mut out = Vec::new();
    for a in attestations.iter().filter(|a| quorum.contains(&a.identity)) {
        match seen.iter_mut().find(|(id, _)| *id == a.identity) {
            Some((_, n)) if *n >= ATTESTATIONS_PER_IDENTITY => continue,
            Some((_, n)) => *n += 1,
            None => seen.push((a.identity, 1)),
        }
        out.push(*a);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn identities_as_a_json_array_or_one_per_line() {
        let (a, b) = (hash_to_base58(&[1; 32]), hash_to_base58(&[2; 32]));
        assert_eq!(parse_identities(&format!("[\"{a}\", \"{b}\"]")).unwrap(), [[1; 32], [2; 32]]);
        assert_eq!(parse_identities(&format!("# validators\n{a}\n\n  {b}  # second\n")).unwrap(), [[1; 32], [2; 32]]);
        assert!(parse_identities("").unwrap_err().to_string().contains("lists no identities"));
        assert!(parse_identities("[1]").unwrap_err().to_string().contains("entry 0 is not a string"));
        let e = parse_identities(&format!("{a}\n{}", "2".repeat(100_000))).unwrap_err().to_string();
        assert!(e.contains("identity 2") && e.len() < 300, "{e}");
        assert!(Trust::quorum(&[[1; 32], [1; 32]], 1, None, None).is_err());
        assert!(Trust::quorum(&[[1; 32]], 2, None, None).is_err());
    }
}
