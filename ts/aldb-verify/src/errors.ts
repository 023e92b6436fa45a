/**
 * Every failure this package reports is an {@link AldbError} whose `code` names the rule of
 * docs/SPEC.md that was broken, so callers can switch on it rather than parse messages.
 */

/** Proof verification (§6.1). */
export type ProofErrorCode =
  | "depths_not_increasing"
  | "empty_with_siblings"
  | "terminal_off_path"
  | "root_mismatch";

/** Decoding a proof from its JSON (§7.1) or wire (§7.2) form. */
export type ProofDecodeErrorCode =
  | "version"
  | "terminal_kind"
  | "truncated"
  | "trailing_bytes"
  | "too_many_siblings"
  | "missing_field"
  | "unknown_field"
  | "bad_type"
  | "depth_range"
  | "base58"
  | "hash_length";

/** Decoding a root record (§9.1), the same names as tests/vectors/records-v1.json uses. */
export type RecordErrorCode =
  | "length"
  | "version"
  | "commitment"
  | "unknown_flag"
  | "flag_without_parent"
  | "parent_slot_not_below_slot"
  | "unset_field_not_zero"
  | "record_hash_mismatch";

/** Attestation verification (§9.3); the names tests/vectors/records-v1.json uses. */
export type AttestationErrorCode =
  | "s_not_reduced"
  | "identity_not_a_point"
  | "r_not_a_point"
  | "identity_small_order"
  | "r_small_order"
  | "equation";

/** Why a vote transaction does not count (§10.3, §10.4); the names tests/vectors/votes-v1.json uses. */
export type VoteErrorCode =
  | "oversized"
  | "malformed"
  | "versioned"
  | "not_tower_sync"
  | "malformed_vote"
  | "unknown_vote_account"
  | "wrong_signer"
  | "wrong_slot"
  | "wrong_hash"
  | "duplicate"
  | "bad_signature";

/** Why a root is not accepted through the votes (§10.4). */
export type VoteChainErrorCode = "insufficient_stake" | "too_many_votes" | "too_old" | "unstamped";

export type ErrorCode =
  | ProofErrorCode
  | VoteErrorCode
  | VoteChainErrorCode
  | ProofDecodeErrorCode
  | RecordErrorCode
  | AttestationErrorCode
  | "invalid_argument"
  | "json_syntax"
  | "account_mismatch"
  | "quorum"
  | "genesis_hash"
  | EpochErrorCode;

export class AldbError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(`${code}: ${message}`);
    this.name = "AldbError";
    this.code = code;
  }
}

/** The epoch chain (§11); the names tests/vectors/epochs-v1.json uses. */
export type EpochErrorCode =
  | "schedule"
  | "length"
  | "empty"
  | "too_many_members"
  | "not_sorted"
  | "duplicate_vote_account"
  | "zero_stake"
  | "stake_exceeds_total"
  | "frozen"
  | "skipped_epoch"
  | "stale_transition"
  | "slot_not_in_epoch"
  | "expired"
  | "set_not_bound"
  | "wrong_set"
  | "too_many_votes"
  | "insufficient_stake"
  | "epoch_ahead"
  | "epoch_behind"
  | "misbehaviour"
  | "not_conflicting"
  | "untrusted_set"
  | "wrong_kind"
  | "state"
  | "version";
