/**
 * @aldb/verify: a light-client verifier for aldb (docs/SPEC.md) on @noble/hashes and
 * @noble/curves. Synchronous; runs in Node >= 18 and browsers.
 */

export { blake2s, blake2sHasher } from "./blake2s.js";
export type { Blake2sParams } from "./blake2s.js";
export { sha512 } from "./sha512.js";
export { checkEd25519Strict, verifyEd25519Strict, L as ED25519_L } from "./ed25519.js";
export {
  base58Encode,
  base58Decode,
  base58DecodeExact,
  base64Encode,
  base64Decode,
  hexEncode,
  hexDecode,
  bytesEqual,
} from "./encoding.js";
export { parseJson, stringifyJson } from "./json.js";
export type { JsonValue } from "./json.js";
export { AldbError } from "./errors.js";
export type {
  ErrorCode,
  ProofErrorCode,
  ProofDecodeErrorCode,
  RecordErrorCode,
  AttestationErrorCode,
  VoteErrorCode,
  VoteChainErrorCode,
  EpochErrorCode,
} from "./errors.js";
export { EMPTY_ROOT, keyPath, accountValue, leafHash, branchHash, bit } from "./commitment.js";
export type { Hash, AccountFields } from "./commitment.js";
export {
  PROOF_VERSION,
  verifyProof,
  verifyProofPath,
  encodeProofWire,
  decodeProofWire,
  proofToJson,
  proofFromJson,
} from "./proof.js";
export type { Proof, Sibling, Terminal, Claim, ProofJson } from "./proof.js";
export {
  RECORD_LEN,
  RECORD_LEN_WITH_BANK_HASH,
  RECORD_VERSION,
  FLAG_PARENT,
  FLAG_CHAINED,
  FLAG_BLOCK,
  FLAG_BANK_HASH,
  FLAG_SLOT_BANK_HASH,
  ATTEST_PREFIX,
  decodeRecord,
  encodeRecord,
  recordFlags,
  recordHash,
  attestationMessage,
  checkAttestation,
  verifyAttestation,
  checkQuorum,
  extendsRecord,
  recordToJson,
  recordFromJson,
} from "./record.js";
export type { RootRecord, Commitment, Attestation, QuorumRule, QuorumResult, RecordWithAttestations } from "./record.js";
export { decodeAccount, verifyAccountProof, attestedRoot } from "./account.js";
export type { AccountJson, VerifiedAccount, VerifiedAnswer, AttestedRoot } from "./account.js";
export {
  PACKET_DATA_SIZE,
  MAX_LOCKOUTS,
  TAG_TOWER_SYNC,
  TAG_TOWER_SYNC_SWITCH,
  MAX_EVIDENCE_VOTES,
  VOTE_PROGRAM_ID,
  mixRoot,
  bankHash,
  decodeTowerSync,
  parseVoteTransaction,
  verifyVoteSignatures,
  validatorSet,
  tallyVotes,
  verifyRootByVotes,
  voteEvidenceFromJson,
  verifyAccountByVotes,
  checkVoteAge,
  voteAccountsParam,
} from "./votes.js";
export type {
  Lockout,
  TowerSync,
  VoteTransaction,
  Validator,
  ValidatorSet,
  VoteOutcome,
  Tally,
  AcceptedRoot,
  VoteEvidence,
  AccountByVotes,
} from "./votes.js";
export {
  SET_DOMAIN,
  MAX_SET_MEMBERS,
  MINIMUM_SLOTS_PER_EPOCH,
  epochSchedule,
  validateSchedule,
  scheduleFromJson,
  epochOf,
  firstSlot,
  leaderScheduleEpoch,
  nextSetFrom,
  epochSet,
  decodeEpochSet,
  epochSetFromJson,
  epochSetToJson,
  mixRootAndSet,
  bankHashWithSet,
  slotEvidenceFromJson,
  slotEvidenceToJson,
  evidenceBankHash,
  vouch,
  transitionFromJson,
  checkpointFromJson,
  misbehaviourFromJson,
  misbehaviourToJson,
  verifyMisbehaviour,
  LightClient,
} from "./epochs.js";
export type {
  EpochSchedule,
  EpochSet,
  EpochSetJson,
  SlotEvidence,
  SlotEvidenceJson,
  Vouched,
  Transition,
  Checkpoint,
  MisbehaviourKind,
  Misbehaviour,
  HeldEpoch,
  Advanced,
  EpochRoot,
} from "./epochs.js";
