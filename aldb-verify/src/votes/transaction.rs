//! A legacy Solana transaction carrying one `TowerSync` (`docs/SPEC.md` §10.3).

use alloc::vec::Vec;

use super::reader::Reader;
use super::{PACKET_DATA_SIZE, TowerSync, VOTE_PROGRAM_ID, VoteError};
use crate::Hash;
use crate::record::verify_ed25519_strict;

/// A vote transaction, decoded; its signatures are not yet checked
/// ([`VoteTransaction::verify_signatures`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteTransaction<'a> {
    /// The signed message: the transaction's bytes after its signatures.
    pub message: &'a [u8],
    /// The signatures, one per signer, in signer order.
    pub signatures: Vec<[u8; 64]>,
    /// The signers' keys (the first is the fee payer).
    pub signers: Vec<[u8; 32]>,
    /// The vote account: the instruction's first account.
    pub vote_account: [u8; 32],
    /// The instruction's accounts that are signers, any of which may be the authorized voter.
    pub instruction_signers: Vec<[u8; 32]>,
    /// The message's recent blockhash.
    pub recent_blockhash: Hash,
    /// The vote.
    pub tower: TowerSync,
}

fn bad(reason: &'static str) -> VoteError {
    VoteError::Malformed { reason }
}

/// One compiled instruction: program index, account indexes, data.
struct Instruction<'a> {
    program: u8,
    accounts: &'a [u8],
    data: &'a [u8],
}

impl<'a> VoteTransaction<'a> {
    /// The fee payer, the first signer.
    pub fn fee_payer(&self) -> [u8; 32] {
        self.signers.first().copied().unwrap_or([0; 32])
    }

    /// Decodes `bytes` as a legacy transaction whose only instruction is a `TowerSync` or
    /// `TowerSyncSwitch` to the vote program, in the rule order of §10.3.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, VoteError> {
        if bytes.len() > PACKET_DATA_SIZE {
            return Err(VoteError::Oversized { len: bytes.len() });
        }
        let mut r = Reader::new(bytes);
        let n_sig = r.short_vec().ok_or(bad("bad signature count"))?;
        let mut signatures = Vec::new();
        for _ in 0..n_sig {
            signatures.push(r.array::<64>().ok_or(bad("truncated signatures"))?);
        }
        let message_start = r.position();
        if r.peek().is_some_and(|b| b & 0x80 != 0) {
            return Err(VoteError::Versioned);
        }
        let [n_required, n_readonly_signed, n_readonly_unsigned] = r.array::<3>().ok_or(bad("truncated header"))?;
        let n_keys = r.short_vec().ok_or(bad("bad key count"))?;
        let keys_bytes = r.take(n_keys.saturating_mul(32)).ok_or(bad("truncated keys"))?;
        let keys: Vec<[u8; 32]> = keys_bytes.chunks_exact(32).filter_map(|k| k.try_into().ok()).collect();
        let recent_blockhash = r.array().ok_or(bad("truncated blockhash"))?;
        let n_ix = r.short_vec().ok_or(bad("bad instruction count"))?;
        let mut instructions = Vec::new();
        for _ in 0..n_ix {
            let program = r.u8().ok_or(bad("truncated instruction"))?;
            let n_acc = r.short_vec().ok_or(bad("bad account index count"))?;
            let accounts = r.take(n_acc).ok_or(bad("truncated account indexes"))?;
            let n_data = r.short_vec().ok_or(bad("bad data length"))?;
            let data = r.take(n_data).ok_or(bad("truncated data"))?;
            instructions.push(Instruction { program, accounts, data });
        }
        if !r.is_done() {
            return Err(bad("bytes after the message"));
        }

        let n_required = usize::from(n_required);
        if n_sig == 0 || n_required != n_sig {
            return Err(bad("signature count is not the header's"));
        }
        if usize::from(n_readonly_signed) >= n_required {
            return Err(bad("the fee payer is read-only"));
        }
        if n_required + usize::from(n_readonly_unsigned) > keys.len() {
            return Err(bad("header counts exceed the keys"));
        }
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(bad("a key is listed twice"));
        }
        for ix in &instructions {
            let p = usize::from(ix.program);
            if p == 0 || p >= keys.len() || ix.accounts.iter().any(|&a| usize::from(a) >= keys.len()) {
                return Err(bad("an index is out of range"));
            }
        }

        let [ix] = instructions.as_slice() else { return Err(VoteError::NotTowerSync) };
        if keys[usize::from(ix.program)] != VOTE_PROGRAM_ID {
            return Err(VoteError::NotTowerSync);
        }
        let tower = TowerSync::decode_instruction(ix.data)?;
        let Some(&first) = ix.accounts.first() else {
            return Err(VoteError::MalformedVote { reason: "no vote account" });
        };
        let mut instruction_signers: Vec<[u8; 32]> =
            ix.accounts.iter().map(|&a| usize::from(a)).filter(|&a| a < n_required).map(|a| keys[a]).collect();
        instruction_signers.sort_unstable();
        instruction_signers.dedup();
        Ok(VoteTransaction {
            message: &bytes[message_start..],
            signatures,
            signers: keys[..n_required].to_vec(),
            vote_account: keys[usize::from(first)],
            instruction_signers,
            recent_blockhash,
            tower,
        })
    }

    /// Checks every signature over the message, strictly (`docs/SPEC.md` §9.3's rules), as the
    /// runtime requires all of a transaction's signatures to verify.
    pub fn verify_signatures(&self) -> Result<(), VoteError> {
        for (key, sig) in self.signers.iter().zip(&self.signatures) {
            verify_ed25519_strict(key, self.message, sig).map_err(|_| VoteError::BadSignature)?;
        }
        Ok(())
    }
}
