//! The on-disk format, version 4 (`docs/FORMAT.md` is the prose version of this file).
//!
//! A snapshot file holds the records a slot wrote: account records, bucket records and prefix
//! node records. Records refer to each other with [`Ref`]s, which may point into older files:
//! what did not change is referenced, not copied. All integers are little-endian and every
//! record starts at a multiple of 8 bytes.
//!
//! A reference addresses at most [`MAX_RECORD_OFFSET`] bytes of one file, so what one slot
//! writes beyond a file's bound goes on in **part files** ([`FLAG_PART`], named by
//! [`part_file_name`]): consecutive sequence numbers, each a file of its own, the last of them
//! the slot's file proper. Version 3 files (no parts, 32-bit counts) are still read.

use aldb_verify::spec::Hash;

/// First bytes of every snapshot file.
pub const MAGIC: [u8; 8] = *b"ALDBSNAP";
/// Last bytes of every snapshot file, after the checksum.
pub const END_MAGIC: [u8; 8] = *b"SNAPEND\0";
/// The format version this code writes (and reads).
pub const FORMAT_VERSION: u32 = 4;
/// The older version still read: the same records and references, a header with 32-bit counts
/// and no part files.
pub const FORMAT_VERSION_V3: u32 = 3;
/// Header size in bytes.
pub const HEADER_LEN: usize = 128;
/// Footer size: the 128-bit checksum, 8 reserved zero bytes, then [`END_MAGIC`].
pub const FOOTER_LEN: usize = 32;
/// Header flag: the file is a full base (references nothing older).
pub const FLAG_FULL: u32 = 1;
/// Header flag: the writer failed before this file and recovered; the slots after
/// [`Header::gap_after`] and before this file's slot were committed but never written.
pub const FLAG_AFTER_GAP: u32 = 2;
/// Header flag (version 4): the file is a part of its slot's state, not the slot's file. Its
/// records are reached only through the file that follows it; it carries no root and is never
/// served as a slot.
pub const FLAG_PART: u32 = 4;
/// Every flag this version defines; a reader refuses a file with any other bit set.
pub const KNOWN_FLAGS: u32 = FLAG_FULL | FLAG_AFTER_GAP | FLAG_PART;
/// The flags version 3 defines.
const KNOWN_FLAGS_V3: u32 = FLAG_FULL | FLAG_AFTER_GAP;
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

/// The most bytes a writer puts in one file, header and footer included: 32 GiB, so every
/// record starts at an offset a reference holds. What a slot writes past it goes on in the
/// next part file.
pub const MAX_FILE_BYTES: u64 = 1 << 35;

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
    /// The sequence number of the slot's first file: its first part, or `seq` itself when the
    /// slot fits in one file (always `seq` in version 3).
    pub first_seq: u32,
    /// Bytes between the header and the footer.
    pub body_len: u64,
    /// Account records in this file.
    pub accounts: u64,
    /// Prefix node records in this file.
    pub nodes: u64,
    /// Bucket records in this file.
    pub buckets: u64,
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
    /// Whether this file is a part of its slot's state rather than the slot's file.
    pub fn is_part(&self) -> bool {
        self.flags & FLAG_PART != 0
    }

    /// Encodes the header, as version [`FORMAT_VERSION`].
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
        b[84..88].copy_from_slice(&self.first_seq.to_le_bytes());
        b[88..96].copy_from_slice(&self.body_len.to_le_bytes());
        b[96..104].copy_from_slice(&self.accounts.to_le_bytes());
        b[104..112].copy_from_slice(&self.nodes.to_le_bytes());
        b[112..120].copy_from_slice(&self.buckets.to_le_bytes());
        if self.flags & FLAG_AFTER_GAP != 0 {
            b[120..128].copy_from_slice(&self.gap_after.unwrap_or(u64::MAX).to_le_bytes());
        }
        b
    }

    /// Decodes and checks a header of version [`FORMAT_VERSION`] or [`FORMAT_VERSION_V3`].
    pub fn decode(b: &[u8]) -> Result<Header, HeaderError> {
        if b.len() < HEADER_LEN {
            return Err(HeaderError::TooShort { len: b.len() });
        }
        if b[0..8] != MAGIC {
            return Err(HeaderError::Magic);
        }
        let version = u32_at(b, 8);
        // The fields that differ between the versions; the rest lie where they always did.
        struct Layout {
            known_flags: u32,
            first_seq: Option<usize>,
            counts: [usize; 3],
            count_len: usize,
            gap_after: usize,
            /// Bytes that must be zero (besides 21..24), and those zero unless the file follows a gap.
            zero: &'static [std::ops::Range<usize>],
        }
        let layout = match version {
            FORMAT_VERSION => Layout {
                known_flags: KNOWN_FLAGS,
                first_seq: Some(84),
                counts: [96, 104, 112],
                count_len: 8,
                gap_after: 120,
                zero: &[],
            },
            FORMAT_VERSION_V3 => Layout {
                known_flags: KNOWN_FLAGS_V3,
                first_seq: None,
                counts: [96, 100, 104],
                count_len: 4,
                gap_after: 108,
                zero: &[84..88, 116..128],
            },
            _ => return Err(HeaderError::Version { version }),
        };
        // Everything a reader relies on is checked here, so a header that passed can be used
        // without further checks: a wrong field is refused, never misread.
        let flags = u32_at(b, 12);
        if flags & !layout.known_flags != 0 {
            return Err(HeaderError::UnknownFlags { flags: flags & !layout.known_flags });
        }
        let gap_zero = (flags & FLAG_AFTER_GAP == 0).then_some(layout.gap_after..layout.gap_after + 8);
        let zero = std::iter::once(21..24).chain(layout.zero.iter().cloned()).chain(gap_zero);
        if zero.flat_map(|r| b[r].iter()).any(|&x| x != 0) {
            return Err(HeaderError::Reserved);
        }
        let (seq, oldest_seq, bucket_bits) = (u32_at(b, 16), u32_at(b, 80), b[20]);
        let first_seq = layout.first_seq.map_or(seq, |at| u32_at(b, at));
        if seq == 0 {
            return Err(HeaderError::SeqZero);
        }
        if first_seq == 0 || first_seq > seq {
            return Err(HeaderError::FirstSeq { first_seq, seq });
        }
        if oldest_seq == 0 || oldest_seq > first_seq {
            return Err(HeaderError::OldestSeq { oldest_seq, first_seq });
        }
        if flags & FLAG_FULL != 0 && oldest_seq != first_seq {
            return Err(HeaderError::FullNotFirst { oldest_seq, first_seq });
        }
        if bucket_bits > MAX_BUCKET_BITS {
            return Err(HeaderError::BucketBits { bucket_bits });
        }
        let root = hash_at(b, 40);
        let root_ref = Ref(u64_at(b, 72));
        if flags & FLAG_PART != 0 {
            // A part is never a slot: it names no root, and the gap is the slot file's to tell.
            if flags & FLAG_AFTER_GAP != 0 {
                return Err(HeaderError::PartAfterGap);
            }
            if root != [0; 32] || !root_ref.is_null() {
                return Err(HeaderError::PartWithRoot);
            }
        }
        let count = |at: usize| if layout.count_len == 8 { u64_at(b, at) } else { u64::from(u32_at(b, at)) };
        let parent = u64_at(b, 32);
        let gap_after = (flags & FLAG_AFTER_GAP != 0)
            .then(|| u64_at(b, layout.gap_after))
            .and_then(|g| (g != u64::MAX).then_some(g));
        Ok(Header {
            flags,
            seq,
            bucket_bits,
            slot: u64_at(b, 24),
            parent: (parent != u64::MAX).then_some(parent),
            root,
            root_ref,
            oldest_seq,
            first_seq,
            body_len: u64_at(b, 88),
            accounts: count(layout.counts[0]),
            nodes: count(layout.counts[1]),
            buckets: count(layout.counts[2]),
            gap_after,
        })
    }
}

/// Why [`Header::decode`] refused a header: what it does not understand is refused, never
/// misread (`docs/FORMAT.md`, Header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// Fewer bytes than a header.
    #[error("file of {len} bytes is shorter than a header")]
    TooShort {
        /// The bytes there were.
        len: usize,
    },
    /// The first bytes are not [`MAGIC`].
    #[error("bad magic")]
    Magic,
    /// A format version this build does not read.
    #[error("format version {version}, this build reads {FORMAT_VERSION_V3} and {FORMAT_VERSION}")]
    Version {
        /// The version the header names.
        version: u32,
    },
    /// Flag bits the version does not define.
    #[error("unknown header flags {flags:#x}")]
    UnknownFlags {
        /// The undefined bits that are set.
        flags: u32,
    },
    /// A reserved byte (or `gap_after` without its flag) is not zero.
    #[error("reserved header bytes are not zero")]
    Reserved,
    /// Sequence number 0, which no file gets.
    #[error("sequence number 0")]
    SeqZero,
    /// `first_seq` outside `1..=seq`.
    #[error("first_seq {first_seq} is not in 1..={seq}")]
    FirstSeq {
        /// The header's `first_seq`.
        first_seq: u32,
        /// The header's `seq`.
        seq: u32,
    },
    /// `oldest_seq` outside `1..=first_seq`.
    #[error("oldest_seq {oldest_seq} is not in 1..={first_seq}")]
    OldestSeq {
        /// The header's `oldest_seq`.
        oldest_seq: u32,
        /// The header's `first_seq`.
        first_seq: u32,
    },
    /// A full file reaching files before its slot's first one.
    #[error("a full file's oldest_seq {oldest_seq} is not its slot's first file {first_seq}")]
    FullNotFirst {
        /// The header's `oldest_seq`.
        oldest_seq: u32,
        /// The header's `first_seq`.
        first_seq: u32,
    },
    /// `bucket_bits` above [`MAX_BUCKET_BITS`].
    #[error("bucket_bits {bucket_bits} exceeds {MAX_BUCKET_BITS}")]
    BucketBits {
        /// The header's `bucket_bits`.
        bucket_bits: u8,
    },
    /// A part file with the after-a-gap flag: the gap is its slot file's to tell.
    #[error("a part file marked as following a gap")]
    PartAfterGap,
    /// A part file naming a root or a top record: a part is never a slot.
    #[error("a part file with a root")]
    PartWithRoot,
}

/// The file name of a published snapshot.
pub fn file_name(seq: u32, slot: u64) -> String {
    format!("{seq:010}-{slot:020}.snap")
}

/// Appended by a starting writer to the name of a damaged or foreign file numbered above every
/// valid one, so the number is free again; readers report such files and never serve them.
pub const SET_ASIDE_SUFFIX: &str = ".damaged";

/// Parses a published snapshot's file name into `(seq, slot)`. A part file's name is not one.
pub fn parse_file_name(name: &str) -> Option<(u32, u64)> {
    parse_stem(name.strip_suffix(".snap")?)
}

/// The file name of a published part file: a part of `slot`'s state, numbered `seq`. It differs
/// from a slot file's name, so what lists slots by name never takes a part for one.
pub fn part_file_name(seq: u32, slot: u64) -> String {
    format!("{seq:010}-{slot:020}.part")
}

/// Parses a part file's name into `(seq, slot)`.
pub fn parse_part_name(name: &str) -> Option<(u32, u64)> {
    parse_stem(name.strip_suffix(".part")?)
}

/// What a published name says a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A slot's file (`.snap`): its header holds the slot's root.
    Slot,
    /// A part of a slot's state (`.part`), never served as a slot.
    Part,
}

/// Parses any published name, slot file or part, into `(seq, slot, kind)`.
pub fn parse_published_name(name: &str) -> Option<(u32, u64, FileKind)> {
    match parse_file_name(name) {
        Some((seq, slot)) => Some((seq, slot, FileKind::Slot)),
        None => parse_part_name(name).map(|(seq, slot)| (seq, slot, FileKind::Part)),
    }
}

/// The published name of file `seq` of `slot`, of kind `kind`.
pub fn published_name(seq: u32, slot: u64, kind: FileKind) -> String {
    match kind {
        FileKind::Slot => file_name(seq, slot),
        FileKind::Part => part_file_name(seq, slot),
    }
}

impl FileKind {
    /// The kind a file with this header must be published as.
    pub fn of(header: &Header) -> FileKind {
        if header.is_part() { FileKind::Part } else { FileKind::Slot }
    }
}

fn parse_stem(stem: &str) -> Option<(u32, u64)> {
    let (seq, slot) = stem.split_once('-')?;
    if seq.len() != 10 || slot.len() != 20 || !seq.bytes().chain(slot.bytes()).all(|c| c.is_ascii_digit()) {
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
        assert_eq!(parse_file_name("+000000003-00000000000000000099.snap"), None);
        // A part's name is never a slot file's, and the other way round.
        assert_eq!(parse_file_name(&part_file_name(3, 99)), None);
        assert_eq!(parse_part_name(&part_file_name(3, 99)), Some((3, 99)));
        assert_eq!(parse_part_name(&file_name(3, 99)), None);
        assert_eq!(parse_published_name(&part_file_name(4, 9)), Some((4, 9, FileKind::Part)));
        assert_eq!(parse_published_name(&file_name(4, 9)), Some((4, 9, FileKind::Slot)));
        assert_eq!(published_name(4, 9, FileKind::Part), part_file_name(4, 9));
        // The last record a reference holds starts inside the largest file a writer makes.
        const { assert!(MAX_RECORD_OFFSET < MAX_FILE_BYTES) };
        assert!(Ref::checked(u32::MAX - 1, MAX_RECORD_OFFSET).is_some());
    }

    fn sample() -> Header {
        Header {
            flags: FLAG_FULL,
            seq: 9,
            bucket_bits: 12,
            slot: 1 << 40,
            parent: None,
            root: [5; 32],
            root_ref: Ref::new(9, 128),
            oldest_seq: 9,
            first_seq: 9,
            body_len: 4096,
            accounts: 1 << 33,
            nodes: 2,
            buckets: 3,
            gap_after: None,
        }
    }

    #[test]
    fn header_round_trips() {
        let h = sample();
        assert_eq!(Header::decode(&h.encode()), Ok(h));
        let gap = Header { flags: FLAG_AFTER_GAP, oldest_seq: 4, gap_after: Some(77), ..h };
        assert_eq!(Header::decode(&gap.encode()), Ok(gap));
        let gap_none = Header { gap_after: None, ..gap };
        assert_eq!(Header::decode(&gap_none.encode()), Ok(gap_none));
        // A full state over parts 6..=9: the slot's file and one of its parts.
        let parted = Header { oldest_seq: 6, first_seq: 6, ..h };
        assert_eq!(Header::decode(&parted.encode()), Ok(parted));
        let part = Header { flags: FLAG_FULL | FLAG_PART, seq: 7, root: [0; 32], root_ref: Ref::NULL, ..parted };
        assert_eq!(Header::decode(&part.encode()), Ok(part));
        assert!(part.is_part() && !parted.is_part());
        // What a reader would misread is refused: unknown flags, non-zero reserved bytes, a
        // sequence number 0, an oldest_seq outside 1..=first_seq, a first_seq outside 1..=seq,
        // a full file pointing older than its first part, a bucket level deeper than any layout.
        let refused = |h: &Header, edit: &dyn Fn(&mut [u8; HEADER_LEN])| {
            let mut b = h.encode();
            edit(&mut b);
            Header::decode(&b).is_err()
        };
        assert!(refused(&h, &|b| b[12] |= 8));
        assert!(refused(&h, &|b| b[22] = 1));
        assert!(refused(&h, &|b| b[121] = 1), "gap_after without the flag");
        assert!(refused(&h, &|b| b[16..20].copy_from_slice(&0u32.to_le_bytes())));
        assert!(refused(&h, &|b| b[80..84].copy_from_slice(&10u32.to_le_bytes())));
        assert!(refused(&h, &|b| b[80..84].copy_from_slice(&0u32.to_le_bytes())));
        assert!(refused(&h, &|b| b[80..84].copy_from_slice(&8u32.to_le_bytes())));
        assert!(refused(&h, &|b| b[84..88].copy_from_slice(&10u32.to_le_bytes())));
        assert!(refused(&h, &|b| b[84..88].copy_from_slice(&0u32.to_le_bytes())));
        assert!(refused(&h, &|b| b[20] = MAX_BUCKET_BITS + 1));
        assert!(refused(&parted, &|b| b[80..84].copy_from_slice(&5u32.to_le_bytes())), "full, older than part 1");
        // A part names no root and no gap.
        assert!(refused(&part, &|b| b[40] = 1));
        assert!(refused(&part, &|b| b[72] = 1));
        assert!(refused(&part, &|b| b[12] |= FLAG_AFTER_GAP as u8));
        // Any other version is refused rather than misread.
        for other in [0u8, 1, 2, 5] {
            let mut bad = h.encode();
            bad[8] = other;
            assert!(Header::decode(&bad).is_err());
        }
    }

    /// A version 3 header, as that version's writer laid it out, reads into the same fields: its
    /// counts widened, its first file its own.
    #[test]
    fn version_3_headers_are_read() {
        let v3 = |flags: u32, gap: Option<u64>| {
            let mut b = [0u8; HEADER_LEN];
            b[0..8].copy_from_slice(&MAGIC);
            b[8..12].copy_from_slice(&FORMAT_VERSION_V3.to_le_bytes());
            b[12..16].copy_from_slice(&flags.to_le_bytes());
            b[16..20].copy_from_slice(&9u32.to_le_bytes());
            b[20] = 12;
            b[24..32].copy_from_slice(&(1u64 << 40).to_le_bytes());
            b[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
            b[40..72].copy_from_slice(&[5; 32]);
            b[72..80].copy_from_slice(&Ref::new(9, 128).0.to_le_bytes());
            b[80..84].copy_from_slice(&(if flags & FLAG_FULL != 0 { 9u32 } else { 4 }).to_le_bytes());
            b[88..96].copy_from_slice(&4096u64.to_le_bytes());
            b[96..100].copy_from_slice(&u32::MAX.to_le_bytes());
            b[100..104].copy_from_slice(&2u32.to_le_bytes());
            b[104..108].copy_from_slice(&3u32.to_le_bytes());
            if let Some(g) = gap {
                b[108..116].copy_from_slice(&g.to_le_bytes());
            }
            b
        };
        let want = Header { accounts: u64::from(u32::MAX), ..sample() };
        assert_eq!(Header::decode(&v3(FLAG_FULL, None)), Ok(want));
        let gap = Header::decode(&v3(FLAG_AFTER_GAP, Some(77))).unwrap();
        assert_eq!((gap.gap_after, gap.oldest_seq, gap.first_seq), (Some(77), 4, 9));
        // Version 3 knows no parts, and its reserved bytes stay reserved.
        assert!(Header::decode(&v3(FLAG_PART, None)).is_err());
        let mut b = v3(FLAG_FULL, None);
        b[84] = 1;
        assert!(Header::decode(&b).is_err());
        let mut b = v3(FLAG_FULL, None);
        b[120] = 1;
        assert!(Header::decode(&b).is_err());
        let mut b = v3(FLAG_FULL, None);
        b[110] = 1;
        assert!(Header::decode(&b).is_err(), "gap_after without the flag");
    }
}
