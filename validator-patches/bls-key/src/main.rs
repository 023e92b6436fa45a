//! `aldb-bls-key VOTER_KEYPAIR VOTE_ACCOUNT`: the BLS public key and proof of possession that a
//! vote account must carry for agave 4.2.0's `validator_admission_ticket` feature to admit it to
//! an epoch's stakes (SIMD-0357), printed as one JSON line of hex:
//! `{"blsPubkey": "<48 bytes>", "proofOfPossession": "<96 bytes>"}`.
//!
//! Why a Rust tool and not Python: the bytes must be agave's own, and agave's are not a textbook
//! scheme. The key is derived from the authorized voter's ed25519 key (the signature of
//! `bls-key-derive-alpenglow` as the input of blst's KeyGen), and the proof signs
//! `"ALPENGLOW" || vote account || BLS public key` under the POP ciphersuite's tag, not the
//! public key alone as the IETF `PopProve` does. This tool calls `solana-bls-signatures` 3.3.0,
//! the crate and version agave 4.2.0's vote program verifies with, so nothing is re-implemented:
//! the key is the one agave's test validator derives for its own vote account, and the same
//! voter key file gives the same bytes every time (ed25519 signatures are deterministic).
//! Before printing, the proof is verified as the vote program verifies it.

use anyhow::{Context, Result, bail};
use solana_bls_signatures::{VerifiableProofOfPossession, keypair::Keypair as BlsKeypair};
use solana_keypair::{Keypair, read_keypair_file};

/// agave-votor-messages 4.2.0's `BLS_KEYPAIR_DERIVE_SEED`: the public seed of the derivation.
const BLS_KEYPAIR_DERIVE_SEED: &[u8] = b"alpenglow";

/// The label of solana-vote-program 4.2.0's `generate_pop_message`.
const POP_LABEL: &[u8] = b"ALPENGLOW";

/// `generate_pop_message`: the label, then the vote account's address (the crate appends the
/// BLS public key itself).
fn pop_message(vote_account: &[u8; 32]) -> Vec<u8> {
    [POP_LABEL, vote_account.as_slice()].concat()
}

/// The compressed BLS public key and proof of possession for `vote_account` voted by `voter`.
fn bls_key(voter: &Keypair, vote_account: &[u8; 32]) -> Result<([u8; 48], [u8; 96])> {
    let bls = BlsKeypair::derive_from_signer(voter, BLS_KEYPAIR_DERIVE_SEED)
        .context("deriving the BLS key from the voter's key")?;
    let message = pop_message(vote_account);
    let pubkey = bls.public.to_bytes_compressed();
    let proof = bls.proof_of_possession(Some(&message)).to_bytes_compressed();
    proof.verify(&pubkey, Some(&message)).context("the proof of possession does not verify")?;
    Ok((pubkey, proof))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [keypair_path, vote_account] = args.as_slice() else {
        bail!("usage: aldb-bls-key VOTER_KEYPAIR_JSON VOTE_ACCOUNT_BASE58");
    };
    let voter = read_keypair_file(keypair_path)
        .map_err(|e| anyhow::anyhow!("reading the voter keypair {keypair_path}: {e}"))?;
    let decoded = bs58::decode(vote_account)
        .into_vec()
        .with_context(|| format!("the vote account {vote_account:?} is not base58"))?;
    let vote_account: [u8; 32] =
        decoded.try_into().map_err(|d: Vec<u8>| anyhow::anyhow!("the vote account is {} bytes, not 32", d.len()))?;
    let (pubkey, proof) = bls_key(&voter, &vote_account)?;
    println!("{{\"blsPubkey\": \"{}\", \"proofOfPossession\": \"{}\"}}", hex(&pubkey), hex(&proof));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voter() -> Keypair {
        Keypair::new_from_array([0x51; 32])
    }

    #[test]
    fn the_same_voter_gives_the_same_key_and_a_proof_bound_to_the_vote_account() {
        let (pubkey, proof) = bls_key(&voter(), &[0x52; 32]).unwrap();
        assert_eq!(bls_key(&voter(), &[0x52; 32]).unwrap(), (pubkey, proof));
        // Another vote account: the same key, a proof that does not verify for the first.
        let (pubkey2, proof2) = bls_key(&voter(), &[0x53; 32]).unwrap();
        assert_eq!(pubkey2, pubkey);
        assert_ne!(proof2, proof);
        assert!(proof2.verify(&pubkey, Some(&pop_message(&[0x52; 32]))).is_err());
    }

    #[test]
    fn another_voter_gives_another_key() {
        let other = Keypair::new_from_array([0x61; 32]);
        assert_ne!(bls_key(&other, &[0x52; 32]).unwrap().0, bls_key(&voter(), &[0x52; 32]).unwrap().0);
    }
}
