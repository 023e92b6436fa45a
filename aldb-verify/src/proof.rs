//! Inclusion and exclusion proofs, and their verification against a root.

use alloc::vec::Vec;

use crate::spec::{EMPTY_ROOT, Hash, bit, branch_hash, key_path, leaf_hash};

/// One step of a proof: a branch the key's path took, and the hash of the side it did not take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sibling {
    /// Depth of the branch: the bit of the key path that chose the direction.
    pub depth: u8,
    /// Hash of the subtree on the other side of the branch.
    pub hash: Hash,
}

/// Where a proof's path ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Terminal {
    /// A leaf: the key's own (inclusion) or another leaf on its path (exclusion).
    Leaf {
        /// The leaf's key path.
        path: Hash,
        /// The account value hash stored in the leaf.
        value: Hash,
    },
    /// The empty tree (only with no siblings).
    Empty,
}

/// A proof that a key path is present with some value, or absent, under a root.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Proof {
    /// Branches from the root down, each with the hash of the side not taken.
    pub siblings: Vec<Sibling>,
    /// The end of the path.
    pub terminal: Terminal,
}

/// What a valid proof establishes about its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The key is in the tree with this account value hash.
    Present {
        /// Account value hash of the key's leaf.
        value: Hash,
    },
    /// The key is not in the tree (its account has zero lamports or never existed).
    Absent,
}

/// Why a proof was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerifyError {
    /// Branch depths must strictly increase from the root down.
    DepthsNotIncreasing,
    /// An empty terminal must have no siblings.
    EmptyWithSiblings,
    /// The terminal leaf's path leaves the key's path at a branch the proof takes.
    TerminalOffPath {
        /// The branch depth at which the terminal's path turns the other way.
        depth: u8,
    },
    /// The hashes do not reproduce the root.
    RootMismatch,
}

impl core::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::DepthsNotIncreasing => f.write_str("branch depths do not strictly increase"),
            Self::EmptyWithSiblings => f.write_str("empty terminal with siblings"),
            Self::TerminalOffPath { depth } => {
                write!(f, "terminal leaf leaves the key's path at depth {depth}")
            }
            Self::RootMismatch => f.write_str("proof does not hash to the root"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for VerifyError {}

impl Proof {
    /// The root this proof hashes to, for the key path `path`, after checking its shape.
    ///
    /// The shape checks are what make a proof sound on its own: depths strictly increase, each
    /// sibling sits on the side the key's bit does not choose, and an exclusion's terminal leaf
    /// agrees with the key at every branch taken, so it is the leaf the key's walk ends at.
    pub fn compute_root(&self, path: &Hash) -> Result<(Hash, Claim), VerifyError> {
        let mut prev: Option<u8> = None;
        for s in &self.siblings {
            if prev.is_some_and(|p| s.depth <= p) {
                return Err(VerifyError::DepthsNotIncreasing);
            }
            prev = Some(s.depth);
        }
        let (mut acc, claim) = match &self.terminal {
            Terminal::Empty => {
                if !self.siblings.is_empty() {
                    return Err(VerifyError::EmptyWithSiblings);
                }
                return Ok((EMPTY_ROOT, Claim::Absent));
            }
            Terminal::Leaf { path: leaf_path, value } => {
                for s in &self.siblings {
                    let d = usize::from(s.depth);
                    if bit(leaf_path, d) != bit(path, d) {
                        return Err(VerifyError::TerminalOffPath { depth: s.depth });
                    }
                }
                let claim = if leaf_path == path { Claim::Present { value: *value } } else { Claim::Absent };
                (leaf_hash(leaf_path, value), claim)
            }
        };
        for s in self.siblings.iter().rev() {
            acc = if bit(path, usize::from(s.depth)) == 0 {
                branch_hash(s.depth, &acc, &s.hash)
            } else {
                branch_hash(s.depth, &s.hash, &acc)
            };
        }
        Ok((acc, claim))
    }

    /// Verifies the proof for key path `path` against `root` and returns what it proves.
    pub fn verify_path(&self, root: &Hash, path: &Hash) -> Result<Claim, VerifyError> {
        let (computed, claim) = self.compute_root(path)?;
        if &computed != root {
            return Err(VerifyError::RootMismatch);
        }
        Ok(claim)
    }

    /// Verifies the proof for the account `pubkey` against `root`.
    pub fn verify(&self, root: &Hash, pubkey: &[u8; 32]) -> Result<Claim, VerifyError> {
        self.verify_path(root, &key_path(pubkey))
    }
}
