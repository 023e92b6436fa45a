//! `aldb proof --url`: fetch an account and its proof from a Hyades service and verify both
//! locally against a root the caller trusts ([`Trust`]), so the answer does not rest on the
//! service's word for the account, nor, unless `--trust-server` says so, for the root.
//!
//! The service's answers are outside input too: a body is read up to [`MAX_RESPONSE_BYTES`],
//! within one timeout for the whole exchange body included ([`TIMEOUT`]), every hash is decoded
//! by the bounded decoder, and errors quote the service only in excerpts.

use std::time::Duration;

use aldb_verify::json::hash_to_base58;
use aldb_verify::spec::account_value;
use aldb_verify::{Claim, Proof};
use anyhow::{Context, Result, bail};
use base64::Engine as _;
use serde_json::{Value, json};

use crate::accounts::{cut, decode_key};
use crate::trust::{Basis, Trust, check_record};

/// The largest answer read: a proof of the largest Solana account (10 MiB of data, 13.4 MiB in
/// base64) with room for the proof and the other fields.
pub(crate) const MAX_RESPONSE_BYTES: u64 = 16 << 20;

/// The budget of one call, from connecting to the last byte of the body: a server that sends
/// slowly cannot hold `aldb proof` longer than this.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30);

/// How much of a service's own text (an error message, an unexpected answer) an error quotes.
const MAX_QUOTE_CHARS: usize = 200;

/// An account as the service returned it, decoded.
pub(crate) struct Fetched {
    pub(crate) lamports: u64,
    pub(crate) owner: [u8; 32],
    pub(crate) executable: bool,
    pub(crate) data: Vec<u8>,
}

/// What a verified answer says.
pub(crate) struct Verified {
    pub(crate) slot: u64,
    pub(crate) root: [u8; 32],
    pub(crate) account: Option<Fetched>,
    /// Why the root is believed.
    pub(crate) basis: Basis,
}

/// The HTTP client of every call: errors are read from the body, and [`TIMEOUT`] bounds the
/// whole exchange.
pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(TIMEOUT)).build().into()
}

/// Calls one JSON-RPC method; returns its `result` or the service's error as an error.
pub(crate) fn call(agent: &ureq::Agent, url: &str, method: &str, params: Value) -> Result<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut resp = agent
        .post(url)
        .header("content-type", "application/json")
        .send(body.to_string().as_bytes())
        .with_context(|| format!("{method}: cannot reach {url}"))?;
    let status = resp.status();
    // The agent's global timeout keeps running while the body is read, so a slow body counts
    // against it too.
    let text = resp
        .body_mut()
        .with_config()
        .limit(MAX_RESPONSE_BYTES)
        .lossy_utf8(true)
        .read_to_string()
        .with_context(|| format!("{method}: cannot read the response (at most {MAX_RESPONSE_BYTES} bytes)"))?;
    let v: Value = serde_json::from_str(&text)
        .with_context(|| format!("{method}: HTTP {status}, response is not JSON: {}", cut(&text, MAX_QUOTE_CHARS)))?;
    if let Some(e) = v.get("error") {
        let data = e.get("data").map(|d| format!(" {}", cut(&d.to_string(), MAX_QUOTE_CHARS))).unwrap_or_default();
        let message = cut(e.get("message").and_then(Value::as_str).unwrap_or("?"), MAX_QUOTE_CHARS);
        let code = cut(&e.get("code").map(Value::to_string).unwrap_or_default(), 24);
        bail!("{method} failed: error {code}: {message}{data}");
    }
    match v.get("result") {
        Some(r) => Ok(r.clone()),
        None => {
            bail!("{method}: HTTP {status}, response has neither result nor error: {}", cut(&text, MAX_QUOTE_CHARS))
        }
    }
}

fn u64_field(v: &Value, name: &str) -> Result<u64> {
    v.get(name).and_then(Value::as_u64).with_context(|| format!("`{name}` is missing or not an unsigned integer"))
}

fn str_field<'a>(v: &'a Value, name: &str) -> Result<&'a str> {
    v.get(name).and_then(Value::as_str).with_context(|| format!("`{name}` is missing or not a string"))
}

fn decode_account(a: &Value) -> Result<Fetched> {
    let data = a.get("data").and_then(Value::as_array).context("`account.data` is not an array")?;
    if data.len() != 2 || data[1] != "base64" {
        bail!("`account.data` must be [\"<base64>\", \"base64\"]");
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data[0].as_str().context("`account.data[0]` is not a string")?)
        .context("`account.data[0]` is not base64")?;
    if let Some(space) = a.get("space")
        && space.as_u64() != Some(bytes.len() as u64)
    {
        bail!("`account.space` {} does not match the {} data bytes", cut(&space.to_string(), 24), bytes.len());
    }
    Ok(Fetched {
        lamports: u64_field(a, "lamports").context("account")?,
        owner: decode_key("account.owner", str_field(a, "owner")?)?,
        executable: a.get("executable").and_then(Value::as_bool).context("`account.executable` is not a boolean")?,
        data: bytes,
    })
}

/// Fetches `pubkey` at `slot` (the newest if `None`) and verifies the proof against the slot's
/// root as `trust` establishes it.
pub(crate) fn fetch_and_verify(url: &str, pubkey: &[u8; 32], slot: Option<u64>, trust: &Trust) -> Result<Verified> {
    let agent = agent();
    let key = hash_to_base58(pubkey);
    let params = match slot {
        Some(s) => json!([key, {"slot": s}]),
        None => json!([key]),
    };
    let result = call(&agent, url, "getAccountProof", params)?;
    let value = result.get("value").context("getAccountProof: no `value`")?;
    let slot_got = u64_field(value, "slot").context("getAccountProof")?;
    if let Some(s) = slot
        && s != slot_got
    {
        bail!("asked for slot {s}, the service answered for slot {slot_got}");
    }
    let claimed_root = decode_key("root", str_field(value, "root")?)?;

    let (root, basis) = match trust {
        Trust::Root(t) => (*t, Basis::Given),
        Trust::Quorum { quorum, identities, genesis_hash, commitment } => {
            let doc = call(&agent, url, "getRootRecord", json!([slot_got]))?;
            let doc = doc.get("value").context("getRootRecord: no `value`")?;
            check_record(doc, slot_got, quorum, *identities, *genesis_hash, *commitment)?
        }
        Trust::Server => {
            // The slot's root, asked for separately: at least the service must agree with itself.
            let served = call(&agent, url, "getStateRoot", json!([slot_got]))?;
            let value = served.get("value").context("getStateRoot: no `value`")?;
            (decode_key("getStateRoot root", str_field(value, "root")?)?, Basis::Server)
        }
    };
    if root != claimed_root {
        let whose = match basis {
            Basis::Given => "the trusted root",
            Basis::Record { .. } => "the root of the quorum-signed record",
            Basis::Server => "getStateRoot's root",
        };
        bail!(
            "the proof's root {} at slot {slot_got} is not {whose} {}",
            hash_to_base58(&claimed_root),
            hash_to_base58(&root)
        );
    }

    let proof =
        Proof::from_json_value(value.get("proof").context("getAccountProof: no `proof`")?).context("bad proof")?;
    let claim = proof.verify(&root, pubkey).context("proof rejected")?;
    let account = match value.get("account") {
        None | Some(Value::Null) => None,
        Some(a) => Some(decode_account(a).context("bad account")?),
    };
    match (&account, claim) {
        (Some(a), Claim::Present { value }) => {
            let expect = account_value(a.lamports, &a.owner, a.executable, &a.data);
            if expect != value {
                bail!(
                    "the returned account hashes to {}, but the proof commits to {}",
                    hash_to_base58(&expect),
                    hash_to_base58(&value)
                );
            }
        }
        (None, Claim::Absent) => {}
        (Some(_), Claim::Absent) => bail!("the service returned an account, but the proof shows it is absent"),
        (None, Claim::Present { .. }) => bail!("the service returned no account, but the proof shows one is present"),
    }
    Ok(Verified { slot: slot_got, root, account, basis })
}

/// The lines `aldb proof` prints for a verified answer.
pub(crate) fn report(pubkey: &[u8; 32], v: &Verified) -> String {
    let mut out = String::new();
    let key = hash_to_base58(pubkey);
    match &v.account {
        Some(a) => {
            out.push_str(&format!("account {key}\n"));
            out.push_str(&format!("  lamports: {}\n", a.lamports));
            out.push_str(&format!("  owner: {}\n", hash_to_base58(&a.owner)));
            out.push_str(&format!("  executable: {}\n", a.executable));
            out.push_str(&format!(
                "  data: {} bytes: {}\n",
                a.data.len(),
                base64::engine::general_purpose::STANDARD.encode(&a.data)
            ));
        }
        None => out.push_str(&format!("account {key}: absent\n")),
    }
    out.push_str(&v.basis.describe());
    out.push('\n');
    out.push_str(&format!("verified against root {} at slot {}", hash_to_base58(&v.root), v.slot));
    out
}
