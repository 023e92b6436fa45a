//! The on-disk format, version 3 (`docs/FORMAT.md` is the prose version of this file).
//!
//! A snapshot file holds the records a slot wrote: account records, bucket records and prefix
//! node records. Records refer to each other with [`Ref`]s, which may point into older files:
//! what did not change is referenced, not copied. All integers are little-endian and every
//! record starts at a multiple of 8 bytes.

use aldb_verify::spec::Hash;

/// First bytes of every snapshot file.
pub const MAGIC: [u8; 8] = *b"ALDBSNAP";
/// Last bytes of every snapshot file, after the checksum.
pub const END_MAGIC: [u8; 8] = *b"SNAPEND\0";
/// The format version this code writes and reads.
pub const FORMAT_VERSION: u32 = 3;
/// Header size in bytes.
pub const HEADER_LEN: usize = 128;
/// Footer size: the 128-bit checksum, 8 reserved zero bytes, then [`END_MAGIC`].
pub const FOOTER_LEN: usize = 32;
/// Header flag: the file is a full base (references nothing older).
pub const FLAG_FULL: u32 = 1;
/// Header flag: the writer failed before this file and recovered; the slots after
/// [`Header::gap_after`] and before this file's slot were committed but never written.
pub const FLAG_AFTER_GAP: u32 = 2;
/// Every flag this version defines; a reader refuses a file with any other bit set.
pub const KNOWN_FLAGS: u32 = FLAG_FULL | FLAG_AFTER_GAP;
/// The deepest bucket level a file may declare (the engine's own bound).
pub const MAX_BUCKET_BITS: u8 = 32;

/// Size of a prefix node record with `arity` child references: its hash, then the references.
/// Nodes are stored at even levels only; a node refers to its four grandchildren (arity 4). The
/// odd level between is recomputed from the grandchildren when a proof needs it: a third fewer
/// bytes per changed path than storing every level, for one extra hash per two levels of a
/// proof. When the bucket level is odd, the even level just above it is not stored either: the
/// node three levels above the buckets refers to its eight great-grandchild buckets (arity 8).
/// That deepest stored level is where nearly every update rewrites a node of its own, so one
/// 96-byte record there replaces a 64-byte and a 48-byte one.
pub const fn node_len(arity: usize) -> usize {
    32 + 8 * arity
}

/// The most child references a node record has.
pub const MAX_ARITY: usize = 8;

/// Whether prefix nodes at level `d` have records, in a layout whose buckets are at level
/// `bucket_bits`: even levels above the buckets, except the one just above an odd bucket level
/// (the top level 0 always is, when there is a level above the buckets).
pub const fn node_stored(d: usize, bucket_bits: usize) -> bool {
    d < bucket_bits && d.is_multiple_of(2) && (d == 0 || d + 1 != bucket_bits)
}

/// The number of child references of a stored node record at level `d` of a layout whose
/// buckets are at level `bucket_bits`: its children are `log2(arity)` levels below.
pub const fn node_arity(d: usize, bucket_bits: usize) -> usize {
    if d + 1 == bucket_bits {
        2
    } else if d + 3 == bucket_bits {
        8
    } else {
        4
    }
}
/// Size of a bucket record's fixed part: hash, leaf count, padding.
pub const BUCKET_HEAD_LEN: usize = 40;
/// Size of one leaf inside a bucket record: its account record reference. The leaf's path and
/// value hash are recomputed from the account record, which holds the pubkey and everything
/// hashed; leaves are in path order.
pub const BUCKET_LEAF_LEN: usize = 8;
/// Size of an account record's fixed part, before its data.
pub const ACCOUNT_HEAD_LEN: usize = 80;

/// A reference to a record: the file's sequence number and the record's offset in 8-byte units.
/// Zero is the null reference (an empty subtree): sequence numbers start at 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ref(pub u64);

/// The largest byte offset a reference can hold: files are at most 32 GiB.
pub const MAX_RECORD_OFFSET: u64 = (u32::MAX as u64) << 3;

impl Ref {
    /// The null reference.
    pub const NULL: Ref = Ref(0);

    /// A reference to byte `offset` of file `seq`, if a reference can hold it: `offset` a
    /// multiple of 8 and at most [`MAX_RECORD_OFFSET`].
    pub fn checked(seq: u32, offset: u64) -> Option<Ref> {
        (offset.is_multiple_of(8) && offset <= MAX_RECORD_OFFSET).then(|| Ref::new(seq, offset))
    }

    /// A reference to byte `offset` (a multiple of 8) of file `seq`.
    pub fn new(seq: u32, offset: u64) -> Ref {
        Ref((u64::from(seq) << 32) | (offset >> 3))
    }

    /// The file's sequence number.
    pub fn seq(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// Byte offset of the record in its file.
    pub fn offset(self) -> u64 {
        (self.0 & 0xFFFF_FFFF) << 3
    }

    /// Whether this is the null reference.
    pub fn is_null(self) -> bool {
        self.0 == 0
    }
}

/// The fixed header at the start of every file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Flags ([`FLAG_FULL`]).
    pub flags: u32,
    /// This file's sequence number.
    pub seq: u32,
    /// Bucket level of the tree layout.
    pub bucket_bits: u8,
    /// The slot this snapshot is the state of.
    pub slot: u64,
    /// The parent slot, if known.
    pub parent: Option<u64>,
    /// The state root at `slot`.
    pub root: Hash,
    /// Reference to the top record (the level-0 prefix node, or bucket 0 with no prefix levels).
    pub root_ref: Ref,
    /// Every record reachable from this file lives in a file with this sequence number or later.
    pub oldest_seq: u32,
    /// Bytes between the header and the footer.
    pub body_len: u64,
    /// Account records in this file.
    pub accounts: u32,
    /// Prefix node records in this file.
    pub nodes: u32,
    /// Bucket records in this file.
    pub buckets: u32,
    /// With [`FLAG_AFTER_GAP`]: the newest slot published before the writer failed (`None` when
    /// nothing had been published since the writer started).
    pub gap_after: Option<u64>,
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

pub(crate) fn hash_at(b: &[u8], at: usize) -> Hash {
    let mut h = [0u8; 32];
    h.copy_from_slice(&b[at..at + 32]);
    h
}

impl Header {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..20].copy_from_slice(&self.seq.to_le_bytes());
        b[20] = self.bucket_bits;
        b[24..32].copy_from_slice(&self.slot.to_le_bytes());
        b[32..40].copy_from_slice(&self.parent.unwrap_or(u64::MAX).to_le_bytes());
        b[40..72].copy_from_slice(&self.root);
        b[72..80].copy_from_slice(&self.root_ref.0.to_le_bytes());
        b[80..84].copy_from_slice(&self.oldest_seq.to_le_bytes());
        b[88..96].copy_from_slice(&self.body_len.to_le_bytes());
        b[96..100].copy_from_slice(&self.accounts.to_le_bytes());
        b[100..104].copy_from_slice(&self.nodes.to_le_bytes());
        b[104..108].copy_from_slice(&self.buckets.to_le_bytes());
        if self.flags & FLAG_AFTER_GAP != 0 {
            b[108..116].copy_from_slice(&self.gap_after.unwrap_or(u64::MAX).to_le_bytes());
        }
        b
    }

    /// Decodes and checks a header.
    pub fn decode(b: &[u8]) -> Result<Header, String> {
        if b.len() < HEADER_LEN {
            return Err(format!("file of {} bytes is shorter than a header", b.len()));
        }
        if b[0..8] != MAGIC {
            return Err("bad magic".into());
        }
        let version = u32_at(b, 8);
        if version != FORMAT_VERSION {
            return Err(format!("format version {version}, this build reads {FORMAT_VERSION}"));
        }
        // Everything a reader relies on is checked here, so a header that passed can be used
        // without further checks: a wrong field is refused, never misread.
        let flags = u32_at(b, 12);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(format!("unknown header flags {:#x}", flags & !KNOWN_FLAGS));
        }
        let reserved_end = if flags & FLAG_AFTER_GAP != 0 { 116 } else { 108 };
        if b[21..24].iter().chain(&b[84..88]).chain(&b[reserved_end..HEADER_LEN]).any(|&x| x != 0) {
            return Err("reserved header bytes are not zero".into());
        }
        let (seq, oldest_seq, bucket_bits) = (u32_at(b, 16), u32_at(b, 80), b[20]);
        if seq == 0 {
            return Err("sequence number 0".into());
        }
        if oldest_seq == 0 || oldest_seq > seq {
            return Err(format!("oldest_seq {oldest_seq} is not in 1..={seq}"));
        }
        if flags & FLAG_FULL != 0 && oldest_seq != seq {
            return Err(format!("a full file's oldest_seq {oldest_seq} is not its own sequence number {seq}"));
        }
        if bucket_bits > MAX_BUCKET_BITS {
            return Err(format!("bucket_bits {bucket_bits} exceeds {MAX_BUCKET_BITS}"));
        }
        let parent = u64_at(b, 32);
        let gap_after =
            (flags & FLAG_AFTER_GAP != 0).then(|| u64_at(b, 108)).and_then(|g| (g != u64::MAX).then_some(g));
        Ok(Header {
            flags,
            seq,
            bucket_bits,
            slot: u64_at(b, 24),
            parent: (parent != u64::MAX).then_some(parent),
            root: hash_at(b, 40),
            root_ref: Ref(u64_at(b, 72)),
            oldest_seq,
            body_len: u64_at(b, 88),
            accounts: u32_at(b, 96),
            nodes: u32_at(b, 100),
            buckets: u32_at(b, 104),
            gap_after,
        })
    }
}

/// The file name of a published snapshot.
pub fn file_name(seq: u32, slot: u64) -> String {
    format!("{seq:010}-{slot:020}.snap")
}

/// Appended by a starting writer to the name of a damaged or foreign file numbered above every
/// valid one, so the number is free again; readers report such files and never serve them.
pub const SET_ASIDE_SUFFIX: &str = ".damaged";

/// Parses a published snapshot's file name into `(seq, slot)`.
pub fn parse_file_name(name: &str) -> Option<(u32, u64)> {
    let stem = name.strip_suffix(".snap")?;
    let (seq, slot) = stem.split_once('-')?;
    if seq.len() != 10 || slot.len() != 20 {
        return None;
    }
    Some((seq.parse().ok()?, slot.parse().ok()?))
}

/// The footer checksum: XXH3-128 of the header followed by the XXH3-128 of the body, so a
/// writer can stream the body and write the header last. It detects corruption (torn writes, bit
/// rot); authenticity comes from the roots, not from this.
pub fn checksum(header: &[u8], body_digest: u128) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(header);
    h.update(&body_digest.to_le_bytes());
    h.digest128()
}

/// The footer checksum of a complete header and body (what a verifier of a whole file computes).
pub fn file_checksum(header: &[u8], body: &[u8]) -> u128 {
    checksum(header, body_digest(body))
}

/// The first 8 bytes of a key path as a big-endian integer (so integers order as paths do): its
/// top `bucket_bits` bits are the path's bucket.
pub fn prefix_of(path: &Hash) -> u64 {
    let mut p = [0u8; 8];
    p.copy_from_slice(&path[..8]);
    u64::from_be_bytes(p)
}

/// Digest of a whole body, as the streaming writer computes it.
pub(crate) fn body_digest(body: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_and_names_round_trip() {
        let r = Ref::new(7, 8 * 12345);
        assert_eq!((r.seq(), r.offset()), (7, 8 * 12345));
        assert!(Ref::NULL.is_null() && !r.is_null());
        assert_eq!(parse_file_name(&file_name(3, 99)), Some((3, 99)));
        assert_eq!(parse_file_name("0000000003-00000000000000000099.snap.tmp"), None);
        assert_eq!(parse_file_name("x-y.snap"), None);
    }

    #[test]
    fn header_round_trips() {
        let h = Header {
            flags: FLAG_FULL,
            seq: 9,
            bucket_bits: 12,
            slot: 1 << 40,
            parent: None,
            root: [5; 32],
            root_ref: Ref::new(9, 128),
            oldest_seq: 9,
            body_len: 4096,
            accounts: 1,
            nodes: 2,
            buckets: 3,
            gap_after: None,
        };
        assert_eq!(Header::decode(&h.encode()), Ok(h));
        let gap = Header { flags: FLAG_AFTER_GAP, oldest_seq: 4, gap_after: Some(77), ..h };
        assert_eq!(Header::decode(&gap.encode()), Ok(gap));
        let gap_none = Header { gap_after: None, ..gap };
        assert_eq!(Header::decode(&gap_none.encode()), Ok(gap_none));
        // What a reader would misread is refused: unknown flags, non-zero reserved bytes, a
        // sequence number 0, an oldest_seq outside 1..=seq, a full file pointing older, a bucket
        // level deeper than any layout.
        let refused = |edit: &dyn Fn(&mut [u8; HEADER_LEN])| {
            let mut b = h.encode();
            edit(&mut b);
            Header::decode(&b).is_err()
        };
        assert!(refused(&|b| b[12] |= 4));
        assert!(refused(&|b| b[22] = 1));
        assert!(refused(&|b| b[86] = 1));
        assert!(refused(&|b| b[110] = 1));
        assert!(refused(&|b| b[127] = 1));
        assert!(refused(&|b| b[16..20].copy_from_slice(&0u32.to_le_bytes())));
        assert!(refused(&|b| b[80..84].copy_from_slice(&10u32.to_le_bytes())));
        assert!(refused(&|b| b[80..84].copy_from_slice(&0u32.to_le_bytes())));
        assert!(refused(&|b| b[80..84].copy_from_slice(&8u32.to_le_bytes())));
        assert!(refused(&|b| b[20] = MAX_BUCKET_BITS + 1));
        // Any other version, the previous one included, is refused rather than misread.
        for other in [0u8, 1, 2, 4] {
            let mut bad = h.encode();
            bad[8] = other;
            assert!(Header::decode(&bad).is_err());
        }
    }
}
