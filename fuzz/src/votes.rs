//! The vote chain's decoders (`docs/SPEC.md` §10): vote transactions and vote evidence.
//!
//! The body of the `vote_transaction` fuzz target; aldb-verify's `votes_fuzz_regressions` test
//! replays the checked-in inputs through it.

use aldb_verify::votes::{
    MAX_LOCKOUTS, TowerSync, Validator, ValidatorSet, VoteEvidence, VoteTransaction, VoteVerifier,
    verify_account_by_votes,
};

/// Bytes as a vote transaction, and, when they are UTF-8, as vote evidence JSON. What parses
/// holds together: one signature per signer, the message is the input's tail, the tower is 1 to
/// 31 strictly increasing slots; tallying it, and verifying evidence against a set made of its
/// own votes' accounts, does not panic and never counts more stake than the set holds.
pub fn vote_transaction(data: &[u8]) {
    if let Ok(tx) = VoteTransaction::parse(data) {
        assert_eq!(tx.signatures.len(), tx.signers.len());
        assert!(data.ends_with(tx.message));
        check_tower(&tx.tower);
        let set = ValidatorSet::new(&[Validator {
            vote_account: tx.vote_account,
            authorized_voter: tx.instruction_signers.first().copied().unwrap_or([0; 32]),
            stake: u64::MAX,
        }])
        .expect("a one-member set with stake");
        let tally = VoteVerifier::new(&set).tally(tx.tower.slot(), &tx.tower.hash, &[data, data]);
        assert!(tally.stake <= tally.total_stake);
        assert!(tally.outcomes[1].is_err(), "a second copy of a vote never counts");
    }
    if let Ok(t) = TowerSync::decode_instruction(data) {
        check_tower(&t);
    }
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(ev) = VoteEvidence::from_json_str(text) else { return };
    let members: Vec<Validator> = ev
        .votes
        .iter()
        .filter_map(|v| VoteTransaction::parse(v).ok())
        .map(|t| Validator {
            vote_account: t.vote_account,
            authorized_voter: t.instruction_signers.first().copied().unwrap_or([0; 32]),
            stake: 1,
        })
        .collect();
    if let Ok(set) = ValidatorSet::new(&members)
        && let Ok(v) = verify_account_by_votes(&ev, &set)
    {
        assert!(v.accepted.stake.saturating_mul(3) > v.accepted.total_stake.saturating_mul(2));
        assert_eq!(v.accepted.root, ev.root);
    }
}

fn check_tower(t: &TowerSync) {
    assert!(!t.lockouts.is_empty() && t.lockouts.len() <= MAX_LOCKOUTS);
    assert!(t.lockouts.windows(2).all(|w| w[0].slot < w[1].slot));
    if let Some(root) = t.root {
        assert!(t.lockouts[0].slot > root);
    }
}
