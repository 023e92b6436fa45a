//! The binary wire format of a [`Proof`].
//!
//! ```text
//! byte 0       version, WIRE_VERSION (0x01)
//! byte 1       terminal kind: 0x00 empty, 0x01 leaf
//! leaf only    path[32] || value[32]
//! next 2       sibling count, u16 little-endian
//! per sibling  depth:u8 || hash[32], root first
//! ```
//!
//! Nothing may follow the last sibling.
//!
//! Decoding is strict, so that the accepted byte strings and the well-formed proofs correspond
//! one to one and `from_bytes(b).to_bytes() == b` for every accepted `b`. Besides the layout
//! itself, [`Proof::from_bytes`] rejects the two shape errors that do not depend on the key:
//! depths that do not strictly increase ([`DecodeError::DepthsNotIncreasing`]) and an empty
//! terminal with siblings ([`DecodeError::EmptyWithSiblings`]). Such a proof could never verify,
//! and refusing it here keeps malformed input out of caches and logs. Verification still checks
//! the same things itself, because a [`Proof`] can be built in memory without going through the
//! decoder. Whether the terminal leaf lies on the key's path depends on the key and is left to
//! verification.
//!
//! The decoder never panics and never allocates more than the input could fill: the sibling
//! count is checked against [`MAX_SIBLINGS`] and against the bytes actually present before the
//! sibling list is allocated.

use alloc::vec::Vec;

use crate::proof::{Proof, Sibling, Terminal};
use crate::spec::{Hash, PATH_BITS};

/// The version byte that starts every encoded proof.
pub const WIRE_VERSION: u8 = 0x01;

/// Terminal kind byte of the empty tree.
pub const TERMINAL_EMPTY: u8 = 0x00;

/// Terminal kind byte of a leaf, followed by its path and value.
pub const TERMINAL_LEAF: u8 = 0x01;

/// The most siblings a well-formed proof can have: depths strictly increase within `0..=255`.
pub const MAX_SIBLINGS: usize = PATH_BITS;

/// Encoded size of one sibling: its depth byte and its hash.
pub const SIBLING_LEN: usize = 1 + 32;

/// Size of the smallest possible encoding: the empty tree's proof.
pub const MIN_ENCODED_LEN: usize = 2 + 2;

/// Size of the largest well-formed encoding: a leaf terminal and [`MAX_SIBLINGS`] siblings.
pub const MAX_ENCODED_LEN: usize = 2 + 64 + 2 + MAX_SIBLINGS * SIBLING_LEN;

/// Why bytes are not a well-formed encoded proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input has no bytes at all.
    Empty,
    /// The version byte is not [`WIRE_VERSION`].
    UnknownVersion(u8),
    /// The terminal kind byte is neither [`TERMINAL_EMPTY`] nor [`TERMINAL_LEAF`].
    UnknownTerminal(u8),
    /// The input ends before the field being read.
    Truncated {
        /// Total input length needed to hold the field being read.
        needed: usize,
        /// Actual input length.
        have: usize,
    },
    /// The sibling count exceeds [`MAX_SIBLINGS`], which no well-formed proof can.
    TooManySiblings(usize),
    /// An empty terminal declares siblings; only the empty tree has an empty terminal.
    EmptyWithSiblings,
    /// The sibling at this index (root first) is not deeper than the one before it.
    DepthsNotIncreasing {
        /// Index of the offending sibling in the encoded list.
        index: usize,
    },
    /// Bytes remain after the last sibling.
    TrailingBytes(usize),
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Empty => f.write_str("proof bytes are empty"),
            Self::UnknownVersion(v) => {
                write!(f, "unknown proof wire version 0x{v:02x} (expected 0x{WIRE_VERSION:02x})")
            }
            Self::UnknownTerminal(k) => write!(f, "unknown proof terminal kind 0x{k:02x}"),
            Self::Truncated { needed, have } => {
                write!(f, "proof bytes truncated: need at least {needed} bytes, have {have}")
            }
            Self::TooManySiblings(n) => {
                write!(f, "proof declares {n} siblings, more than the possible {MAX_SIBLINGS}")
            }
            Self::EmptyWithSiblings => f.write_str("proof has an empty terminal and siblings"),
            Self::DepthsNotIncreasing { index } => {
                write!(f, "proof sibling {index} is not deeper than the one before it")
            }
            Self::TrailingBytes(n) => write!(f, "{n} trailing bytes after the proof"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for DecodeError {}

/// A cursor over the input that reports shortfalls as [`DecodeError::Truncated`].
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    /// The next `N` bytes as an array.
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let have = self.bytes.len();
        let truncated = DecodeError::Truncated { needed: self.pos.saturating_add(N), have };
        let end = self.pos.checked_add(N).ok_or(truncated)?;
        let slice = self.bytes.get(self.pos..end).ok_or(truncated)?;
        let out = <[u8; N]>::try_from(slice).map_err(|_| truncated)?;
        self.pos = end;
        Ok(out)
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let [b] = self.array::<1>()?;
        Ok(b)
    }

    fn hash(&mut self) -> Result<Hash, DecodeError> {
        self.array::<32>()
    }

    fn u16_le(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array::<2>()?))
    }

    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }
}

impl Proof {
    /// Length of [`Proof::to_bytes`]'s output.
    pub fn encoded_len(&self) -> usize {
        let terminal = match self.terminal {
            Terminal::Empty => 0,
            Terminal::Leaf { .. } => 64,
        };
        2 + terminal + 2 + self.siblings.len().min(usize::from(u16::MAX)) * SIBLING_LEN
    }

    /// Encodes the proof in the wire format (see the [module docs](crate::wire)).
    ///
    /// Encoding is total and writes what it is given, malformed or not, so that tests and tools
    /// can produce bad proofs on purpose. For every proof [`Proof::from_bytes`] accepts, decoding
    /// the output gives the proof back. A proof with more than 65535 siblings (which can never
    /// verify) cannot be represented; its first 65535 siblings are written, and the decoder
    /// rejects the result as [`DecodeError::TooManySiblings`].
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.push(WIRE_VERSION);
        match &self.terminal {
            Terminal::Empty => out.push(TERMINAL_EMPTY),
            Terminal::Leaf { path, value } => {
                out.push(TERMINAL_LEAF);
                out.extend_from_slice(path);
                out.extend_from_slice(value);
            }
        }
        let count = u16::try_from(self.siblings.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&count.to_le_bytes());
        for s in self.siblings.iter().take(usize::from(count)) {
            out.push(s.depth);
            out.extend_from_slice(&s.hash);
        }
        out
    }

    /// Decodes a proof from the wire format, rejecting anything but a well-formed encoding.
    ///
    /// See the [module docs](crate::wire) for exactly what is checked here and what is left to
    /// verification.
    pub fn from_bytes(bytes: &[u8]) -> Result<Proof, DecodeError> {
        if bytes.is_empty() {
            return Err(DecodeError::Empty);
        }
        let mut r = Reader { bytes, pos: 0 };
        let version = r.byte()?;
        if version != WIRE_VERSION {
            return Err(DecodeError::UnknownVersion(version));
        }
        let terminal = match r.byte()? {
            TERMINAL_EMPTY => Terminal::Empty,
            TERMINAL_LEAF => {
                let path = r.hash()?;
                let value = r.hash()?;
                Terminal::Leaf { path, value }
            }
            other => return Err(DecodeError::UnknownTerminal(other)),
        };
        let count = usize::from(r.u16_le()?);
        if count > MAX_SIBLINGS {
            return Err(DecodeError::TooManySiblings(count));
        }
        if count > 0 && terminal == Terminal::Empty {
            return Err(DecodeError::EmptyWithSiblings);
        }
        // count <= 256, so this cannot overflow; checking the length before allocating keeps
        // the allocation within what the input actually holds.
        let body = count * SIBLING_LEN;
        if r.remaining() < body {
            return Err(DecodeError::Truncated { needed: r.pos + body, have: bytes.len() });
        }
        if r.remaining() > body {
            return Err(DecodeError::TrailingBytes(r.remaining() - body));
        }
        let mut siblings = Vec::with_capacity(count);
        let mut prev: Option<u8> = None;
        for index in 0..count {
            let depth = r.byte()?;
            let hash = r.hash()?;
            if prev.is_some_and(|p| depth <= p) {
                return Err(DecodeError::DepthsNotIncreasing { index });
            }
            prev = Some(depth);
            siblings.push(Sibling { depth, hash });
        }
        Ok(Proof { siblings, terminal })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn leaf_proof() -> Proof {
        Proof {
            siblings: vec![Sibling { depth: 3, hash: [7; 32] }, Sibling { depth: 200, hash: [9; 32] }],
            terminal: Terminal::Leaf { path: [1; 32], value: [2; 32] },
        }
    }

    #[test]
    fn empty_tree_proof_is_four_bytes() {
        let p = Proof { siblings: vec![], terminal: Terminal::Empty };
        assert_eq!(p.to_bytes(), vec![WIRE_VERSION, TERMINAL_EMPTY, 0, 0]);
        assert_eq!(p.to_bytes().len(), MIN_ENCODED_LEN);
        assert_eq!(Proof::from_bytes(&p.to_bytes()), Ok(p));
    }

    #[test]
    fn layout_is_as_documented() {
        let p = leaf_proof();
        let b = p.to_bytes();
        assert_eq!(b.len(), p.encoded_len());
        assert_eq!(b.len(), 2 + 64 + 2 + 2 * 33);
        assert_eq!(b[0], 0x01);
        assert_eq!(b[1], 0x01);
        assert_eq!(&b[2..34], &[1; 32]);
        assert_eq!(&b[34..66], &[2; 32]);
        assert_eq!(&b[66..68], &[2, 0]);
        assert_eq!(b[68], 3);
        assert_eq!(&b[69..101], &[7; 32]);
        assert_eq!(b[101], 200);
        assert_eq!(&b[102..134], &[9; 32]);
        assert_eq!(Proof::from_bytes(&b), Ok(p));
    }

    #[test]
    fn header_errors() {
        assert_eq!(Proof::from_bytes(&[]), Err(DecodeError::Empty));
        assert_eq!(Proof::from_bytes(&[0x02, 0, 0, 0]), Err(DecodeError::UnknownVersion(2)));
        assert_eq!(Proof::from_bytes(&[0x01, 0x02, 0, 0]), Err(DecodeError::UnknownTerminal(2)));
        assert_eq!(Proof::from_bytes(&[0x01]), Err(DecodeError::Truncated { needed: 2, have: 1 }));
        assert_eq!(Proof::from_bytes(&[0x01, 0x00, 0]), Err(DecodeError::Truncated { needed: 4, have: 3 }));
        assert_eq!(Proof::from_bytes(&[0x01, 0x01, 0]), Err(DecodeError::Truncated { needed: 34, have: 3 }));
        assert_eq!(Proof::from_bytes(&[0x01, 0x00, 0, 0, 0]), Err(DecodeError::TrailingBytes(1)));
        assert_eq!(Proof::from_bytes(&[0x01, 0x00, 1, 0]), Err(DecodeError::EmptyWithSiblings));
    }

    #[test]
    fn sibling_count_is_checked_before_allocating() {
        let mut b = leaf_proof().to_bytes();
        b[66..68].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(Proof::from_bytes(&b), Err(DecodeError::TooManySiblings(65535)));
        b[66..68].copy_from_slice(&257u16.to_le_bytes());
        assert_eq!(Proof::from_bytes(&b), Err(DecodeError::TooManySiblings(257)));
        b[66..68].copy_from_slice(&256u16.to_le_bytes());
        assert_eq!(Proof::from_bytes(&b), Err(DecodeError::Truncated { needed: 68 + 256 * 33, have: b.len() }));
        b[66..68].copy_from_slice(&1u16.to_le_bytes());
        assert_eq!(Proof::from_bytes(&b), Err(DecodeError::TrailingBytes(33)));
    }

    #[test]
    fn depths_must_increase() {
        let mut p = leaf_proof();
        p.siblings[1].depth = 3;
        assert_eq!(Proof::from_bytes(&p.to_bytes()), Err(DecodeError::DepthsNotIncreasing { index: 1 }));
        p.siblings[1].depth = 2;
        assert_eq!(Proof::from_bytes(&p.to_bytes()), Err(DecodeError::DepthsNotIncreasing { index: 1 }));
    }

    #[test]
    fn the_deepest_possible_proof_round_trips() {
        let siblings = (0..=255u8).map(|depth| Sibling { depth, hash: [depth; 32] }).collect();
        let p = Proof { siblings, terminal: Terminal::Leaf { path: [0; 32], value: [0; 32] } };
        let b = p.to_bytes();
        assert_eq!(b.len(), MAX_ENCODED_LEN);
        assert_eq!(Proof::from_bytes(&b), Ok(p));
    }

    #[test]
    fn oversized_proofs_encode_without_panicking() {
        let s = Sibling { depth: 0, hash: [0; 32] };
        let p = Proof { siblings: vec![s; 70_000], terminal: Terminal::Leaf { path: [0; 32], value: [0; 32] } };
        let b = p.to_bytes();
        assert_eq!(b.len(), p.encoded_len());
        assert_eq!(Proof::from_bytes(&b), Err(DecodeError::TooManySiblings(65535)));
    }
}
