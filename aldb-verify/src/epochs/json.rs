//! The JSON forms of §11: the epoch schedule, a set, slot evidence, a transition, a checkpoint
//! and the misbehaviour file (read and written), as Hyades serves them and a client stores them.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::{
    Checkpoint, ClientState, EPOCHS_VERSION, EpochError, EpochSchedule, EpochSet, HeldEpoch, Misbehaviour,
    MisbehaviourKind, SlotEvidence, Transition,
};
use crate::base58::Base58Error;
use crate::json::hash_to_base58;
use crate::votes::json::{FieldError, field, key_of, u64_of};
use crate::votes::{MAX_EVIDENCE_VOTES, Validator};

/// Why a JSON document is not one of §11's objects.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EpochJsonError {
    /// The text is not JSON.
    Syntax(String),
    /// A field is missing or holds the wrong kind of value.
    Field {
        /// The field's name.
        field: &'static str,
        /// What it must hold.
        expected: &'static str,
    },
    /// A base58 field is not exactly 32 bytes.
    Base58 {
        /// The field's name.
        field: &'static str,
        /// What is wrong with it.
        error: Base58Error,
    },
    /// The document is well-formed but breaks a rule of §11 (a version, the schedule, the set).
    Rule(EpochError),
}

impl EpochJsonError {
    /// The §11 rule's name for [`Self::Rule`]; `"json"` for a malformed document.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Rule(e) => e.name(),
            _ => "json",
        }
    }
}

impl core::fmt::Display for EpochJsonError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Syntax(msg) => write!(f, "not valid JSON: {msg}"),
            Self::Field { field, expected } => write!(f, "`{field}` must be {expected}"),
            Self::Base58 { field, error } => write!(f, "`{field}`: {error}"),
            Self::Rule(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for EpochJsonError {}

impl From<EpochError> for EpochJsonError {
    fn from(e: EpochError) -> Self {
        Self::Rule(e)
    }
}

type R<T> = Result<T, EpochJsonError>;

impl From<FieldError> for EpochJsonError {
    fn from(e: FieldError) -> Self {
        match e {
            FieldError::Field { field, expected } => Self::Field { field, expected },
            FieldError::Base58 { field, error } => Self::Base58 { field, error },
        }
    }
}

fn i64_of(v: &Value, name: &'static str) -> R<i64> {
    const WANT: &str = "a signed 64-bit integer";
    field(v, name, WANT)?.as_i64().ok_or(EpochJsonError::Field { field: name, expected: WANT })
}

fn object<'a>(v: &'a Value, name: &'static str) -> R<&'a Value> {
    let o = field(v, name, "an object")?;
    if o.is_object() { Ok(o) } else { Err(EpochJsonError::Field { field: name, expected: "an object" }) }
}

fn version(v: &Value) -> R<()> {
    if u64_of(v, "version")? != EPOCHS_VERSION {
        return Err(EpochError::UnsupportedVersion.into());
    }
    Ok(())
}

fn parse(text: &str) -> R<Value> {
    serde_json::from_str(text).map_err(|e| EpochJsonError::Syntax(e.to_string()))
}

impl EpochSchedule {
    /// Reads `{"slotsPerEpoch", "leaderScheduleSlotOffset", "warmup", "firstNormalEpoch",
    /// "firstNormalSlot"}` (what `getEpochSchedule` returns) and checks it.
    pub fn from_json_value(v: &Value) -> R<Self> {
        let s = EpochSchedule {
            slots_per_epoch: u64_of(v, "slotsPerEpoch")?,
            leader_schedule_slot_offset: u64_of(v, "leaderScheduleSlotOffset")?,
            warmup: field(v, "warmup", "a boolean")?
                .as_bool()
                .ok_or(EpochJsonError::Field { field: "warmup", expected: "a boolean" })?,
            first_normal_epoch: u64_of(v, "firstNormalEpoch")?,
            first_normal_slot: u64_of(v, "firstNormalSlot")?,
        };
        s.validate()?;
        Ok(s)
    }

    /// The JSON form.
    pub fn to_json_value(&self) -> Value {
        json!({
            "slotsPerEpoch": self.slots_per_epoch,
            "leaderScheduleSlotOffset": self.leader_schedule_slot_offset,
            "warmup": self.warmup,
            "firstNormalEpoch": self.first_normal_epoch,
            "firstNormalSlot": self.first_normal_slot,
        })
    }
}

impl EpochSet {
    /// Reads `{"epoch", "totalStake", "validators": [{"voteAccount", "authorizedVoter",
    /// "stake"}]}`, validators in any order.
    pub fn from_json_value(v: &Value) -> R<Self> {
        const LIST: &str = "an array of {voteAccount, authorizedVoter, stake}";
        let list = field(v, "validators", LIST)?
            .as_array()
            .ok_or(EpochJsonError::Field { field: "validators", expected: LIST })?;
        if list.len() > super::MAX_SET_MEMBERS {
            return Err(EpochError::Set(super::EpochSetError::TooManyMembers { count: list.len() as u64 }).into());
        }
        let mut members = Vec::with_capacity(list.len());
        for m in list {
            members.push(Validator {
                vote_account: key_of(m, "voteAccount")?,
                authorized_voter: key_of(m, "authorizedVoter")?,
                stake: u64_of(m, "stake")?,
            });
        }
        EpochSet::new(u64_of(v, "epoch")?, u64_of(v, "totalStake")?, &members).map_err(|e| EpochError::Set(e).into())
    }

    /// The JSON form, validators sorted by vote account.
    pub fn to_json_value(&self) -> Value {
        let validators: Vec<Value> = self
            .members()
            .iter()
            .map(|m| {
                json!({
                    "voteAccount": hash_to_base58(&m.vote_account),
                    "authorizedVoter": hash_to_base58(&m.authorized_voter),
                    "stake": m.stake,
                })
            })
            .collect();
        json!({"epoch": self.epoch(), "totalStake": self.total_stake(), "validators": validators})
    }
}

impl SlotEvidence {
    /// Reads `{"version": 1, "slot", "h", "root", "hardForks", "nextSetHash", "votes"}`; other
    /// fields (a `commitment`, an account and its proof) are ignored.
    pub fn from_json_value(v: &Value) -> R<Self> {
        version(v)?;
        const VOTES: &str = "an array of base64 strings";
        let list =
            field(v, "votes", VOTES)?.as_array().ok_or(EpochJsonError::Field { field: "votes", expected: VOTES })?;
        if list.len() > MAX_EVIDENCE_VOTES {
            return Err(EpochError::TooManyVotes { count: list.len() }.into());
        }
        let mut votes = Vec::with_capacity(list.len());
        for item in list {
            let bytes = item
                .as_str()
                .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok())
                .ok_or(EpochJsonError::Field { field: "votes", expected: VOTES })?;
            votes.push(bytes);
        }
        const FORKS: &str = "null or a positive integer";
        let hard_forks = match field(v, "hardForks", FORKS)? {
            Value::Null => None,
            n => Some(
                n.as_u64().filter(|&n| n > 0).ok_or(EpochJsonError::Field { field: "hardForks", expected: FORKS })?,
            ),
        };
        Ok(SlotEvidence {
            slot: u64_of(v, "slot")?,
            h: key_of(v, "h")?,
            root: key_of(v, "root")?,
            hard_forks,
            next_set_hash: key_of(v, "nextSetHash")?,
            votes,
        })
    }

    /// Parses the JSON text of slot evidence.
    pub fn from_json_str(text: &str) -> R<Self> {
        Self::from_json_value(&parse(text)?)
    }

    /// The JSON form.
    pub fn to_json_value(&self) -> Value {
        let votes: Vec<Value> =
            self.votes.iter().map(|b| Value::String(base64::engine::general_purpose::STANDARD.encode(b))).collect();
        json!({
            "version": EPOCHS_VERSION,
            "slot": self.slot,
            "h": hash_to_base58(&self.h),
            "root": hash_to_base58(&self.root),
            "hardForks": self.hard_forks,
            "nextSetHash": hash_to_base58(&self.next_set_hash),
            "votes": votes,
        })
    }
}

impl Transition {
    /// Reads `{"version": 1, "set", "evidence"}`.
    pub fn from_json_value(v: &Value) -> R<Self> {
        version(v)?;
        Ok(Transition {
            set: EpochSet::from_json_value(object(v, "set")?)?,
            evidence: SlotEvidence::from_json_value(object(v, "evidence")?)?,
        })
    }

    /// Parses the JSON text of a transition.
    pub fn from_json_str(text: &str) -> R<Self> {
        Self::from_json_value(&parse(text)?)
    }

    /// The JSON form.
    pub fn to_json_value(&self) -> Value {
        json!({"version": EPOCHS_VERSION, "set": self.set.to_json_value(), "evidence": self.evidence.to_json_value()})
    }
}

impl Checkpoint {
    /// Reads `{"version": 1, "schedule", "set", "time", "trustingPeriod"}`.
    pub fn from_json_value(v: &Value) -> R<Self> {
        version(v)?;
        Ok(Checkpoint {
            schedule: EpochSchedule::from_json_value(object(v, "schedule")?)?,
            set: EpochSet::from_json_value(object(v, "set")?)?,
            time: i64_of(v, "time")?,
            trusting_period: u64_of(v, "trustingPeriod")?,
        })
    }

    /// Parses the JSON text of a checkpoint.
    pub fn from_json_str(text: &str) -> R<Self> {
        Self::from_json_value(&parse(text)?)
    }

    /// The JSON form.
    pub fn to_json_value(&self) -> Value {
        json!({
            "version": EPOCHS_VERSION,
            "schedule": self.schedule.to_json_value(),
            "set": self.set.to_json_value(),
            "time": self.time,
            "trustingPeriod": self.trusting_period,
        })
    }
}

impl Misbehaviour {
    /// Reads the misbehaviour file of §11.6 (its `setHash` is for people and not read).
    pub fn from_json_value(v: &Value) -> R<Self> {
        version(v)?;
        const KIND: &str = "\"conflicting_bank_hashes\" or \"conflicting_next_sets\"";
        let kind = field(v, "kind", KIND)?
            .as_str()
            .and_then(MisbehaviourKind::from_name)
            .ok_or(EpochJsonError::Field { field: "kind", expected: KIND })?;
        Ok(Misbehaviour {
            kind,
            schedule: EpochSchedule::from_json_value(object(v, "schedule")?)?,
            set: EpochSet::from_json_value(object(v, "set")?)?,
            first: SlotEvidence::from_json_value(object(v, "first")?)?,
            second: SlotEvidence::from_json_value(object(v, "second")?)?,
        })
    }

    /// Parses the JSON text of a misbehaviour file.
    pub fn from_json_str(text: &str) -> R<Self> {
        Self::from_json_value(&parse(text)?)
    }

    /// The file's JSON form, the set's hash beside it for people.
    pub fn to_json_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("version".into(), EPOCHS_VERSION.into());
        m.insert("kind".into(), self.kind.name().into());
        m.insert("schedule".into(), self.schedule.to_json_value());
        m.insert("set".into(), self.set.to_json_value());
        m.insert("setHash".into(), hash_to_base58(&self.set.hash()).into());
        m.insert("first".into(), self.first.to_json_value());
        m.insert("second".into(), self.second.to_json_value());
        Value::Object(m)
    }
}

fn evidence_or_null(v: &Value, name: &'static str) -> R<Option<SlotEvidence>> {
    match field(v, name, "slot evidence or null")? {
        Value::Null => Ok(None),
        e => Ok(Some(SlotEvidence::from_json_value(e)?)),
    }
}

impl ClientState {
    /// Reads the state file of §11.5. The invariants are [`super::LightClient::from_state`]'s;
    /// this reads the fields only.
    pub fn from_json_value(v: &Value) -> R<Self> {
        version(v)?;
        const HELD: &str = "an array of {set, time, proof}";
        let list = field(v, "held", HELD)?.as_array().ok_or(EpochJsonError::Field { field: "held", expected: HELD })?;
        if list.len() > 2 {
            return Err(EpochError::State.into());
        }
        let mut held = Vec::with_capacity(list.len());
        for e in list {
            held.push(HeldEpoch {
                set: EpochSet::from_json_value(object(e, "set")?)?,
                time: i64_of(e, "time")?,
                proof: evidence_or_null(e, "proof")?,
            });
        }
        let frozen = match field(v, "frozen", "a misbehaviour file or null")? {
            Value::Null => None,
            m => Some(Misbehaviour::from_json_value(m)?),
        };
        Ok(ClientState {
            schedule: EpochSchedule::from_json_value(object(v, "schedule")?)?,
            trusting_period: u64_of(v, "trustingPeriod")?,
            held,
            last: evidence_or_null(v, "last")?,
            frozen,
        })
    }

    /// The state file of §11.5.
    pub fn to_json_value(&self) -> Value {
        let held: Vec<Value> = self
            .held
            .iter()
            .map(|e| {
                json!({
                    "set": e.set.to_json_value(),
                    "time": e.time,
                    "proof": e.proof.as_ref().map(SlotEvidence::to_json_value),
                })
            })
            .collect();
        json!({
            "version": EPOCHS_VERSION,
            "schedule": self.schedule.to_json_value(),
            "trustingPeriod": self.trusting_period,
            "held": held,
            "last": self.last.as_ref().map(SlotEvidence::to_json_value),
            "frozen": self.frozen.as_ref().map(Misbehaviour::to_json_value),
        })
    }
}

impl super::LightClient {
    /// A client from the text of its state file, checked as [`Self::from_state`] checks.
    pub fn from_state_json_str(text: &str) -> R<Self> {
        Ok(Self::from_state(ClientState::from_json_value(&parse(text)?)?)?)
    }
}
