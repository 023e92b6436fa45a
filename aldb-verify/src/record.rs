//! Root records and attestations (`docs/SPEC.md` §9).
//!
//! A record binds a state root to its slot, its parent's record (a hash chain), the block and
//! the parent bank (and, with `SLOT_BANK_HASH`, its own bank), and the cluster. Its encoding is
//! canonical: [`RootRecord::decode`] accepts exactly the bytes [`RootRecord::encode`] produces, so
//! a record hash names one record.
//! An [`Attestation`] is an ed25519 signature over the record hash; a [`Quorum`] says how many
//! configured identities must have signed before a relayer accepts the root.

use alloc::vec::Vec;

use crate::spec::{Hash, params};

/// Length of an encoded record without `SLOT_BANK_HASH`: every record but those carrying the
/// slot's own bank hash.
pub const RECORD_LEN: usize = 187;
/// Length of an encoded record with `SLOT_BANK_HASH`: the 187 bytes and the slot's bank hash.
pub const RECORD_LEN_WITH_BANK_HASH: usize = RECORD_LEN + 32;
/// The longest encoded record.
pub const MAX_RECORD_LEN: usize = RECORD_LEN_WITH_BANK_HASH;
/// The `version` byte of a v1 record.
pub const RECORD_VERSION: u8 = 1;
/// Domain separator of a record hash: `record_hash = H_rec(record)`.
pub const PERSONAL_RECORD: [u8; 8] = *b"aldbrcrd";
/// Prefix of every attestation message, before the record hash.
pub const ATTEST_PREFIX: &[u8; 14] = b"aldb-attest-v1";
/// Length of the signed message: the prefix and the record hash.
pub const ATTEST_MESSAGE_LEN: usize = ATTEST_PREFIX.len() + 32;

/// `flags` bit: `parent_slot` is set.
pub const FLAG_PARENT: u8 = 0x01;
/// `flags` bit: `parent_record_hash` links to the parent slot's record.
pub const FLAG_CHAINED: u8 = 0x02;
/// `flags` bit: `blockhash` and `block_height` are set.
pub const FLAG_BLOCK: u8 = 0x04;
/// `flags` bit: `parent_bank_hash` is set.
pub const FLAG_BANK_HASH: u8 = 0x08;
/// `flags` bit: the slot's own bank hash follows the 187 bytes (`bank_hash`, a 219-byte record).
pub const FLAG_SLOT_BANK_HASH: u8 = 0x10;
const KNOWN_FLAGS: u8 = FLAG_PARENT | FLAG_CHAINED | FLAG_BLOCK | FLAG_BANK_HASH | FLAG_SLOT_BANK_HASH;

/// The commitment level at which a slot was committed and its record signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Commitment {
    /// Optimistically confirmed by a supermajority.
    Confirmed,
    /// Rooted (finalized).
    Finalized,
}

impl Commitment {
    /// The byte of the encoding.
    pub const fn to_byte(self) -> u8 {
        match self {
            Commitment::Confirmed => 1,
            Commitment::Finalized => 2,
        }
    }

    /// The level of an encoded byte, if it names one.
    pub const fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(Commitment::Confirmed),
            2 => Some(Commitment::Finalized),
            _ => None,
        }
    }

    /// The name used in JSON: `confirmed` or `finalized`.
    pub const fn name(self) -> &'static str {
        match self {
            Commitment::Confirmed => "confirmed",
            Commitment::Finalized => "finalized",
        }
    }

    /// The level named `confirmed` or `finalized`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "confirmed" => Some(Commitment::Confirmed),
            "finalized" => Some(Commitment::Finalized),
            _ => None,
        }
    }
}

/// The slot's block: its blockhash and block height.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockInfo {
    /// The blockhash (the slot's last entry hash).
    pub blockhash: Hash,
    /// The block height.
    pub block_height: u64,
}

/// The link to the parent slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParentLink {
    /// The parent bank's slot.
    pub slot: u64,
    /// The record hash of the parent's record, when the producer has it.
    pub record_hash: Option<Hash>,
    /// The parent's bank hash as the SlotHashes sysvar of this slot's bank carries it.
    pub bank_hash: Option<Hash>,
}

/// One root record (`docs/SPEC.md` §9.1), decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RootRecord {
    /// The cluster's genesis hash.
    pub genesis_hash: Hash,
    /// The committed slot.
    pub slot: u64,
    /// The parent, unless this is genesis or the first slot after a snapshot start.
    pub parent: Option<ParentLink>,
    /// The level the slot was committed at.
    pub commitment: Commitment,
    /// The v1 state root of the slot.
    pub state_root: Hash,
    /// The block, when its metadata reached the producer in time.
    pub block: Option<BlockInfo>,
    /// The bank hash of bank `slot` itself, when the producer had it (`SLOT_BANK_HASH`). On a
    /// chain carrying the aldb consensus patch it is `sha256(h || state_root)` (`docs/SPEC.md`
    /// §10.1), the hash validators vote on.
    pub bank_hash: Option<Hash>,
}

/// Why bytes are not a v1 record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// Neither [`RECORD_LEN`] bytes nor, with `SLOT_BANK_HASH`, [`RECORD_LEN_WITH_BANK_HASH`].
    Length {
        /// The length received.
        len: usize,
    },
    /// A version byte other than [`RECORD_VERSION`].
    Version {
        /// The version received.
        version: u8,
    },
    /// A commitment byte other than 1 or 2.
    Commitment {
        /// The byte received.
        byte: u8,
    },
    /// A flag bit this version does not define.
    UnknownFlags {
        /// The flags byte.
        flags: u8,
    },
    /// `CHAINED` or `BANK_HASH` without `PARENT`.
    FlagWithoutParent {
        /// The flags byte.
        flags: u8,
    },
    /// `parent_slot` is not below `slot`.
    ParentNotBelow {
        /// The record's slot.
        slot: u64,
        /// The parent slot it names.
        parent_slot: u64,
    },
    /// A field whose flag is unset holds a non-zero byte.
    NonZeroUnsetField {
        /// The field's name in the spec.
        field: &'static str,
    },
}

impl core::fmt::Display for RecordError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RecordError::Length { len } => write!(
                f,
                "a record is {RECORD_LEN} bytes, or {RECORD_LEN_WITH_BANK_HASH} with SLOT_BANK_HASH, got {len}"
            ),
            RecordError::Version { version } => write!(f, "unsupported record version {version}"),
            RecordError::Commitment { byte } => {
                write!(f, "commitment byte {byte} is neither 1 (confirmed) nor 2 (finalized)")
            }
            RecordError::UnknownFlags { flags } => write!(f, "flags {flags:#04x} has undefined bits"),
            RecordError::FlagWithoutParent { flags } => {
                write!(f, "flags {flags:#04x} set CHAINED or BANK_HASH without PARENT")
            }
            RecordError::ParentNotBelow { slot, parent_slot } => {
                write!(f, "parent slot {parent_slot} is not below slot {slot}")
            }
            RecordError::NonZeroUnsetField { field } => {
                write!(f, "field {field} is not zero although its flag is unset")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for RecordError {}

fn read_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn read_hash(b: &[u8], at: usize) -> Hash {
    let mut h = [0u8; 32];
    h.copy_from_slice(&b[at..at + 32]);
    h
}

impl RootRecord {
    /// The `flags` byte of this record.
    pub fn flags(&self) -> u8 {
        let mut f = 0;
        if let Some(p) = &self.parent {
            f |= FLAG_PARENT;
            if p.record_hash.is_some() {
                f |= FLAG_CHAINED;
            }
            if p.bank_hash.is_some() {
                f |= FLAG_BANK_HASH;
            }
        }
        if self.block.is_some() {
            f |= FLAG_BLOCK;
        }
        if self.bank_hash.is_some() {
            f |= FLAG_SLOT_BANK_HASH;
        }
        f
    }

    /// The parent slot, if known.
    pub fn parent_slot(&self) -> Option<u64> {
        self.parent.map(|p| p.slot)
    }

    /// The hash of the parent's record, if this record is chained to it.
    pub fn parent_record_hash(&self) -> Option<Hash> {
        self.parent.and_then(|p| p.record_hash)
    }

    /// The encoded length: [`RECORD_LEN`], or [`RECORD_LEN_WITH_BANK_HASH`] with the slot's
    /// bank hash.
    pub fn encoded_len(&self) -> usize {
        if self.bank_hash.is_some() { RECORD_LEN_WITH_BANK_HASH } else { RECORD_LEN }
    }

    /// The canonical bytes: 187, or 219 with the slot's bank hash. A record built with
    /// `parent.slot >= slot` encodes, but its bytes do not decode; producers never build one.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = alloc::vec![0u8; self.encoded_len()];
        b[0] = RECORD_VERSION;
        b[1..33].copy_from_slice(&self.genesis_hash);
        b[33..41].copy_from_slice(&self.slot.to_le_bytes());
        b[49] = self.commitment.to_byte();
        b[50] = self.flags();
        b[51..83].copy_from_slice(&self.state_root);
        if let Some(p) = &self.parent {
            b[41..49].copy_from_slice(&p.slot.to_le_bytes());
            if let Some(h) = &p.record_hash {
                b[83..115].copy_from_slice(h);
            }
            if let Some(h) = &p.bank_hash {
                b[155..187].copy_from_slice(h);
            }
        }
        if let Some(block) = &self.block {
            b[115..147].copy_from_slice(&block.blockhash);
            b[147..155].copy_from_slice(&block.block_height.to_le_bytes());
        }
        if let Some(h) = &self.bank_hash {
            b[RECORD_LEN..RECORD_LEN_WITH_BANK_HASH].copy_from_slice(h);
        }
        b
    }

    /// Decodes a record, rejecting every encoding [`encode`](Self::encode) would not produce.
    pub fn decode(b: &[u8]) -> Result<Self, RecordError> {
        // The length is checked twice: first against both sizes, so that the fixed fields can be
        // read, then against the size the flags call for.
        if b.len() != RECORD_LEN && b.len() != RECORD_LEN_WITH_BANK_HASH {
            return Err(RecordError::Length { len: b.len() });
        }
        if b[0] != RECORD_VERSION {
            return Err(RecordError::Version { version: b[0] });
        }
        let commitment = Commitment::from_byte(b[49]).ok_or(RecordError::Commitment { byte: b[49] })?;
        let flags = b[50];
        if flags & !KNOWN_FLAGS != 0 {
            return Err(RecordError::UnknownFlags { flags });
        }
        let has = |f: u8| flags & f != 0;
        let want_len = if has(FLAG_SLOT_BANK_HASH) { RECORD_LEN_WITH_BANK_HASH } else { RECORD_LEN };
        if b.len() != want_len {
            return Err(RecordError::Length { len: b.len() });
        }
        if !has(FLAG_PARENT) && (has(FLAG_CHAINED) || has(FLAG_BANK_HASH)) {
            return Err(RecordError::FlagWithoutParent { flags });
        }
        let zero = |range: core::ops::Range<usize>, field: &'static str| {
            if b[range].iter().any(|&x| x != 0) { Err(RecordError::NonZeroUnsetField { field }) } else { Ok(()) }
        };
        let slot = read_u64(b, 33);
        let parent = if has(FLAG_PARENT) {
            let parent_slot = read_u64(b, 41);
            if parent_slot >= slot {
                return Err(RecordError::ParentNotBelow { slot, parent_slot });
            }
            let record_hash = if has(FLAG_CHAINED) {
                Some(read_hash(b, 83))
            } else {
                zero(83..115, "parent_record_hash")?;
                None
            };
            let bank_hash = if has(FLAG_BANK_HASH) {
                Some(read_hash(b, 155))
            } else {
                zero(155..187, "parent_bank_hash")?;
                None
            };
            Some(ParentLink { slot: parent_slot, record_hash, bank_hash })
        } else {
            zero(41..49, "parent_slot")?;
            zero(83..115, "parent_record_hash")?;
            zero(155..187, "parent_bank_hash")?;
            None
        };
        let block = if has(FLAG_BLOCK) {
            Some(BlockInfo { blockhash: read_hash(b, 115), block_height: read_u64(b, 147) })
        } else {
            zero(115..147, "blockhash")?;
            zero(147..155, "block_height")?;
            None
        };
        let bank_hash = has(FLAG_SLOT_BANK_HASH).then(|| read_hash(b, RECORD_LEN));
        Ok(RootRecord {
            genesis_hash: read_hash(b, 1),
            slot,
            parent,
            commitment,
            state_root: read_hash(b, 51),
            block,
            bank_hash,
        })
    }

    /// `record_hash = H_rec(record)`.
    pub fn hash(&self) -> Hash {
        record_hash(&self.encode())
    }

    /// Whether this record extends `parent` on one chain (`docs/SPEC.md` §9.4): same cluster,
    /// parent slot, and a chained parent record hash equal to `parent_hash`.
    pub fn extends(&self, parent: &RootRecord, parent_hash: &Hash) -> bool {
        self.genesis_hash == parent.genesis_hash
            && self.parent.is_some_and(|p| p.slot == parent.slot && p.record_hash.as_ref() == Some(parent_hash))
    }
}

/// The record hash of encoded record bytes (187, or 219 with `SLOT_BANK_HASH`; any bytes hash,
/// only decodable ones name a record).
pub fn record_hash(bytes: &[u8]) -> Hash {
    *params(&PERSONAL_RECORD).hash(bytes).as_array()
}

/// The message an attestation signs: `"aldb-attest-v1" || record_hash`.
pub fn attestation_message(record_hash: &Hash) -> [u8; ATTEST_MESSAGE_LEN] {
    let mut m = [0u8; ATTEST_MESSAGE_LEN];
    m[..ATTEST_PREFIX.len()].copy_from_slice(ATTEST_PREFIX);
    m[ATTEST_PREFIX.len()..].copy_from_slice(record_hash);
    m
}

/// A signature by `identity` over a record hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Attestation {
    /// The signer's ed25519 public key.
    pub identity: [u8; 32],
    /// The ed25519 signature over [`attestation_message`].
    pub signature: [u8; 64],
}

/// Why an attestation does not verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureError {
    /// The identity is not a valid ed25519 public key, or is of small order.
    BadIdentity,
    /// The signature is malformed or does not verify under the identity.
    Invalid,
}

impl core::fmt::Display for SignatureError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SignatureError::BadIdentity => f.write_str("identity is not a usable ed25519 public key"),
            SignatureError::Invalid => f.write_str("signature does not verify"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SignatureError {}

impl Attestation {
    /// Checks the signature over `record_hash` with the strict rules of `docs/SPEC.md` §9.3.
    pub fn verify(&self, record_hash: &Hash) -> Result<(), SignatureError> {
        // RFC 8032 §5.1.3 refuses y >= p; curve25519-dalek reduces it instead, so a point is
        // accepted only if it re-encodes to the same bytes (rule 2 of §9.3).
        if !is_canonical_point(&self.identity) {
            return Err(SignatureError::BadIdentity);
        }
        let mut r = [0u8; 32];
        r.copy_from_slice(&self.signature[..32]);
        if !is_canonical_point(&r) {
            return Err(SignatureError::Invalid);
        }
        let key = ed25519_dalek::VerifyingKey::from_bytes(&self.identity).map_err(|_| SignatureError::BadIdentity)?;
        let sig = ed25519_dalek::Signature::from_bytes(&self.signature);
        key.verify_strict(&attestation_message(record_hash), &sig).map_err(|_| SignatureError::Invalid)
    }
}

/// Verifies an ed25519 signature by `key` over `message` with the strict rules of
/// `docs/SPEC.md` §9.3 (the vote chain, §10, uses them for transaction signatures too).
pub(crate) fn verify_ed25519_strict(
    key: &[u8; 32],
    message: &[u8],
    signature: &[u8; 64],
) -> Result<(), SignatureError> {
    if !is_canonical_point(key) {
        return Err(SignatureError::BadIdentity);
    }
    let mut r = [0u8; 32];
    r.copy_from_slice(&signature[..32]);
    if !is_canonical_point(&r) {
        return Err(SignatureError::Invalid);
    }
    let key = ed25519_dalek::VerifyingKey::from_bytes(key).map_err(|_| SignatureError::BadIdentity)?;
    key.verify_strict(message, &ed25519_dalek::Signature::from_bytes(signature)).map_err(|_| SignatureError::Invalid)
}

/// Whether `bytes` is the canonical encoding of a curve point.
fn is_canonical_point(bytes: &[u8; 32]) -> bool {
    curve25519_dalek::edwards::CompressedEdwardsY(*bytes).decompress().is_some_and(|p| p.compress().0 == *bytes)
}

/// A k-of-n rule over a set of identities (`docs/SPEC.md` §9.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quorum {
    identities: alloc::vec::Vec<[u8; 32]>,
    threshold: usize,
}

/// Why a quorum rule cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuorumError {
    /// The same identity appears twice.
    DuplicateIdentity,
    /// The threshold is 0 or above the number of identities.
    Threshold {
        /// The threshold asked for.
        threshold: usize,
        /// The number of identities.
        identities: usize,
    },
}

impl core::fmt::Display for QuorumError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            QuorumError::DuplicateIdentity => f.write_str("an identity is listed twice"),
            QuorumError::Threshold { threshold, identities } => {
                write!(f, "threshold {threshold} must be between 1 and the {identities} identities")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for QuorumError {}

impl Quorum {
    /// A rule needing `threshold` of `identities`.
    pub fn new(identities: &[[u8; 32]], threshold: usize) -> Result<Self, QuorumError> {
        let mut ids = identities.to_vec();
        ids.sort_unstable();
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return Err(QuorumError::DuplicateIdentity);
        }
        if threshold == 0 || threshold > ids.len() {
            return Err(QuorumError::Threshold { threshold, identities: ids.len() });
        }
        Ok(Quorum { identities: ids, threshold })
    }

    /// The number of attestations needed.
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// Whether `identity` is one of the rule's identities.
    pub fn contains(&self, identity: &[u8; 32]) -> bool {
        self.identities.binary_search(identity).is_ok()
    }

    /// The number of distinct identities of the set with a valid attestation over `record_hash`.
    /// Outsiders, invalid signatures and repeats count for nothing.
    pub fn count_valid(&self, record_hash: &Hash, attestations: &[Attestation]) -> usize {
        let mut seen = alloc::vec![false; self.identities.len()];
        let mut n = 0;
        for a in attestations {
            let Ok(i) = self.identities.binary_search(&a.identity) else { continue };
            if !seen[i] && a.verify(record_hash).is_ok() {
                seen[i] = true;
                n += 1;
            }
        }
        n
    }

    /// Whether at least `threshold` distinct identities of the set attested `record_hash`.
    pub fn is_attested(&self, record_hash: &Hash, attestations: &[Attestation]) -> bool {
        self.count_valid(record_hash, attestations) >= self.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> RootRecord {
        RootRecord {
            genesis_hash: [7; 32],
            slot: 100,
            parent: Some(ParentLink { slot: 99, record_hash: Some([1; 32]), bank_hash: Some([2; 32]) }),
            commitment: Commitment::Confirmed,
            state_root: [3; 32],
            block: Some(BlockInfo { blockhash: [4; 32], block_height: 90 }),
            bank_hash: Some([5; 32]),
        }
    }

    #[test]
    fn round_trips_every_flag_combination() {
        for flags in 0..32u8 {
            let mut r = full();
            if flags & FLAG_PARENT == 0 {
                r.parent = None;
            } else if let Some(p) = &mut r.parent {
                if flags & FLAG_CHAINED == 0 {
                    p.record_hash = None;
                }
                if flags & FLAG_BANK_HASH == 0 {
                    p.bank_hash = None;
                }
            }
            if flags & FLAG_BLOCK == 0 {
                r.block = None;
            }
            if flags & FLAG_SLOT_BANK_HASH == 0 {
                r.bank_hash = None;
            }
            let b = r.encode();
            let needs_parent = FLAG_CHAINED | FLAG_BANK_HASH;
            let expected = if flags & FLAG_PARENT == 0 { flags & !needs_parent } else { flags };
            assert_eq!(r.flags(), expected);
            assert_eq!(b.len(), if flags & FLAG_SLOT_BANK_HASH == 0 { 187 } else { 219 });
            assert_eq!(record_hash(&b), r.hash());
            assert_eq!(RootRecord::decode(&b), Ok(r));
        }
    }

    #[test]
    fn rejects_every_single_byte_change_that_breaks_a_rule() {
        let mut r = full();
        r.parent = None;
        r.block = None;
        r.bank_hash = None;
        let b = r.encode();
        // Any non-zero byte in the unset fields is rejected.
        for at in (41..49).chain(83..187) {
            let mut c = b.clone();
            c[at] = 1;
            assert!(RootRecord::decode(&c).is_err(), "byte {at}");
        }
        // The slot's bank hash is there exactly when its flag says so.
        let mut c = b.clone();
        c[50] = FLAG_SLOT_BANK_HASH;
        assert_eq!(RootRecord::decode(&c), Err(RecordError::Length { len: 187 }));
        c.extend_from_slice(&[0; 32]);
        assert_eq!(RootRecord::decode(&c).map(|r| r.bank_hash), Ok(Some([0; 32])));
        c[50] = 0;
        assert_eq!(RootRecord::decode(&c), Err(RecordError::Length { len: 219 }));
        let mut c = b.clone();
        c[50] = FLAG_CHAINED | FLAG_PARENT;
        c[41] = 200; // parent 200 > slot 100
        assert!(matches!(RootRecord::decode(&c), Err(RecordError::ParentNotBelow { .. })));
        c[0] = 2;
        assert_eq!(RootRecord::decode(&c), Err(RecordError::Version { version: 2 }));
        assert_eq!(RootRecord::decode(&b[..186]), Err(RecordError::Length { len: 186 }));
    }

    #[test]
    fn signatures_verify_and_quorum_counts_distinct_members() {
        use ed25519_dalek::{Signer, SigningKey};
        let keys: alloc::vec::Vec<SigningKey> = (1..=3u8).map(|i| SigningKey::from_bytes(&[i; 32])).collect();
        let ids: alloc::vec::Vec<[u8; 32]> = keys.iter().map(|k| k.verifying_key().to_bytes()).collect();
        let h = full().hash();
        let att = |k: &SigningKey| Attestation {
            identity: k.verifying_key().to_bytes(),
            signature: k.sign(&attestation_message(&h)).to_bytes(),
        };
        let a0 = att(&keys[0]);
        assert_eq!(a0.verify(&h), Ok(()));
        assert_eq!(a0.verify(&[0; 32]), Err(SignatureError::Invalid));
        let q = Quorum::new(&ids[..2], 2).expect("valid rule");
        assert!(!q.is_attested(&h, &[a0, a0]));
        assert!(!q.is_attested(&h, &[a0, att(&keys[2])]));
        assert!(q.is_attested(&h, &[a0, att(&keys[1])]));
        assert_eq!(Quorum::new(&[ids[0], ids[0]], 1), Err(QuorumError::DuplicateIdentity));
        assert!(Quorum::new(&ids, 4).is_err());
    }
}
