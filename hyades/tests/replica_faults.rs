//! A replica serves only what it verified (SeaweedFS on loopback): the bucket is damaged in many
//! ways, chosen with a fixed seed (bit flips anywhere in the manifest's head, fields changed with
//! the JSON still valid, entries naming objects that do not exist, an oversized head, damaged and
//! deleted sealed segments, snapshot objects flipped, deleted and emptied, record and vote
//! objects flipped, truncated or deleted, a cache file and copied log segments flipped on disk),
//! and after each a fresh replica and one that was running before must answer every undamaged
//! slot as the directory's Hyades does, refuse every damaged one with the damaged-slot (-32011) or
//! missing-file (-32014) code, never answer a root, proof or record the directory would not,
//! announce only verified roots, and serve everything again by themselves, without a restart,
//! once the bucket is repaired.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use aldb_format::votes::{BankEntry, VoteLog, VoteLogEntry, VoteLogOptions, VotesEntry};
use aldb_objstore::manifest::{Head, MANIFEST_NAME, checksum_hex, root_hex};
use aldb_snapshot::WriterConfig;
use aldb_snapshot::records::{RecordInput, RecordProducer, Signer};
use aldb_verify::record::Commitment;
use common::replica::{replica_with, shipper};
use common::votes::{bank, voters};
use common::weed::Weed;
use common::{Model, Server, b58, metric, wait_until};
use futures_util::{SinkExt, StreamExt};
use hyades::codes;
use object_store::ObjectStore;
use object_store::path::Path;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const URL: &str = "s3://faults/mainnet";
/// Slots written: 0 a full file, the rest deltas, a full file again every 8.
const SLOTS: u64 = 20;
/// How long a replica may take to see a repair (it tries refused entries every second).
const WAIT: Duration = Duration::from_secs(30);
const DAMAGED: &[i64] = &[codes::SLOT_CORRUPT];
const MISSING: &[i64] = &[codes::SLOT_FILE_MISSING];
const EITHER: &[i64] = &[codes::SLOT_CORRUPT, codes::SLOT_FILE_MISSING];

/// The writer's directory, shipped once, its Hyades, and the bucket's objects as shipped.
struct Bed {
    weed: Weed,
    _dir: tempfile::TempDir,
    model: Model,
    local: Server,
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    pristine: BTreeMap<String, Vec<u8>>,
    rt: tokio::runtime::Runtime,
}

/// Block `block`'s votes: every voter on `slot`.
fn votes_in(block: u64, slot: u64, b: &BankEntry, vs: &[aldb_fixture::votes::Voter]) -> VoteLogEntry {
    VoteLogEntry::Votes(VotesEntry {
        slot: block,
        transactions: vs.iter().map(|v| v.vote(slot, &b.bank_hash)).collect(),
    })
}

impl Bed {
    fn new() -> Option<Self> {
        let weed = Weed::start()?;
        let dir = tempfile::tempdir().unwrap();
        let config =
            WriterConfig { keep_slots: 1000, refresh_slots: 8, direct_io: false, ..WriterConfig::new(dir.path()) };
        let mut model = Model::new(config, 25);
        let mut records = RecordProducer::open(dir.path(), [0x47; 32], Some(Signer::from_seed(&[9; 32]))).unwrap();
        let vs = voters();
        let mut log =
            VoteLog::open_with(dir.path(), VoteLogOptions { segment_bytes: 64 << 20, segment_slots: 4 }).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let mut ship = shipper(dir.path(), &weed, URL);
        let mut banks: Vec<BankEntry> = Vec::new();
        for s in 0..SLOTS {
            model.commit_random(if s == 0 { 120 } else { 12 });
            banks.push(bank(s, model.root(s), None));
            let input = RecordInput {
                slot: s,
                parent: s.checked_sub(1),
                commitment: Commitment::Finalized,
                state_root: model.root(s),
                block: None,
                parent_bank_hash: None,
                bank_hash: None,
            };
            records.produce(input).unwrap();
            let mut entries = vec![VoteLogEntry::Bank(banks[s as usize])];
            if s > 0 {
                entries.push(votes_in(s, s - 1, &banks[s as usize - 1], &vs));
            }
            log.append(&entries).unwrap();
            // Shipped every 4 slots: the head seals its entries past 8, so slots are listed
            // both by a sealed segment and by the head.
            if s % 4 == 3 {
                model.flush();
                rt.block_on(ship.ship_once()).unwrap();
            }
        }
        drop(log);
        let local = Server::start(dir.path());
        let (store, prefix) = aldb_objstore::open_bucket(URL, &weed.options()).unwrap();
        let pristine = rt.block_on(async {
            let mut out = BTreeMap::new();
            let mut list = store.list(Some(&prefix));
            while let Some(meta) = list.next().await {
                let meta = meta.unwrap();
                let name = meta
                    .location
                    .prefix_match(&prefix)
                    .unwrap()
                    .map(|p| p.as_ref().to_string())
                    .collect::<Vec<_>>()
                    .join("/");
                out.insert(name, store.get(&meta.location).await.unwrap().bytes().await.unwrap().to_vec());
            }
            out
        });
        assert!(pristine.contains_key(MANIFEST_NAME), "{:?}", pristine.keys().collect::<Vec<_>>());
        Some(Self { weed, _dir: dir, model, local, store, prefix, pristine, rt })
    }

    fn at(&self, name: &str) -> Path {
        name.split('/').fold(self.prefix.clone(), |p, part| p.child(part))
    }

    fn put(&self, name: &str, bytes: Vec<u8>) {
        self.rt.block_on(self.store.put(&self.at(name), bytes.into())).unwrap();
    }

    fn delete(&self, name: &str) {
        self.rt.block_on(self.store.delete(&self.at(name))).unwrap();
    }

    /// Puts every object back as shipped.
    fn repair(&self, names: &[String]) {
        for n in names {
            self.put(n, self.pristine[n].clone());
        }
    }

    fn head(&self) -> Head {
        Head::decode(&self.pristine[MANIFEST_NAME]).unwrap()
    }

    fn names(&self, prefix: &str, suffix: &str) -> Vec<String> {
        self.pristine.keys().filter(|n| n.starts_with(prefix) && n.ends_with(suffix)).cloned().collect()
    }

    /// The slots whose chain of files reaches sequence number `seq`, from the directory.
    fn reaching(&self, seq: u64) -> BTreeSet<u64> {
        let mut out = BTreeSet::new();
        for slot in 0..SLOTS {
            let info = self.local.service.as_ref().unwrap().hyades().slot(Some(slot)).unwrap();
            let f = self.file_of(u64::from(info.seq));
            if f.0 <= seq && seq <= u64::from(info.seq) {
                out.insert(slot);
            }
        }
        out
    }

    /// `(oldest_seq, name)` of the shipped file of sequence number `seq`.
    fn file_of(&self, seq: u64) -> (u64, String) {
        let name = self.names("", "").into_iter().find(|n| n.starts_with(&format!("{seq:010}-"))).unwrap();
        let bytes = &self.pristine[&name];
        let h = aldb_format::format::Header::decode(&bytes[..128]).unwrap();
        (u64::from(h.oldest_seq), name)
    }

    fn key(&self, slot: u64) -> [u8; 32] {
        *self.model.states[&slot].keys().next().unwrap()
    }

    fn start_replica(&self, cache: &std::path::Path) -> Server {
        replica_with(&self.weed, URL, cache, 1 << 30, |c| {
            c.vote_keep_slots = 4;
            c.record_keep = 1000;
        })
    }
}

/// A call's `result` (its `value` when it has one), or its error code.
fn answer(s: &Server, method: &str, params: Value) -> Result<Value, i64> {
    let r = s.call(method, params);
    match r.get("error") {
        Some(e) => Err(e["code"].as_i64().unwrap()),
        None => Ok(r["result"].get("value").cloned().unwrap_or_else(|| r["result"].clone())),
    }
}

/// What the log methods may answer for a slot whose log entries a damage reached: what a
/// directory's readers answer around damaged or missing entries, or nothing at all.
const LOG_REFUSALS: &[i64] = &[
    codes::RECORD_CORRUPT,
    codes::SLOT_NO_SNAPSHOT,
    codes::SLOT_PRUNED,
    codes::SLOT_NOT_COMMITTED,
    codes::NOTHING_PUBLISHED,
    codes::SLOT_CORRUPT,
    codes::SLOT_FILE_MISSING,
];

/// What one replica must answer after a damage: the directory's answer for every slot outside
/// `damaged`; for one inside, the directory's answer or one of `codes`, and (with
/// `strict_proofs`) a refusal of its proof, since no file of its chain is cached. The log methods
/// likewise for the slots in `logs`, with [`LOG_REFUSALS`].
struct Expect<'a> {
    damaged: BTreeSet<u64>,
    codes: &'a [i64],
    strict_proofs: bool,
    logs: BTreeSet<u64>,
    /// The manifest may be refused whole: nothing at all may be served.
    nothing: bool,
}

fn check(bed: &Bed, r: &Server, e: &Expect<'_>, what: &str) {
    for slot in 0..SLOTS {
        let key = b58(&bed.key(slot));
        let asks = [
            ("getStateRoot", json!([slot])),
            ("getAccountProof", json!([key, {"slot": slot}])),
            ("getRootRecord", json!([slot])),
            ("getSlotVotes", json!([slot])),
        ];
        for (method, params) in asks {
            let want = answer(&bed.local, method, params.clone());
            let got = answer(r, method, params.clone());
            let snapshot = matches!(method, "getStateRoot" | "getAccountProof" | "getSlotVotes");
            if got == want {
                assert!(
                    !(e.strict_proofs && method == "getAccountProof" && e.damaged.contains(&slot)),
                    "{what}: {method} {params} was answered though a file it needs is damaged: {got:?}"
                );
                continue;
            }
            let Err(code) = got else { panic!("{what}: {method} {params}: replica {got:?}, directory {want:?}") };
            let by_snapshot = snapshot && e.damaged.contains(&slot) && e.codes.contains(&code);
            let by_log = !snapshot || method == "getSlotVotes";
            let by_log = by_log && e.logs.contains(&slot) && LOG_REFUSALS.contains(&code);
            let by_nothing = e.nothing && code == codes::NOTHING_PUBLISHED;
            assert!(
                by_snapshot || by_log || by_nothing,
                "{what}: {method} {params}: replica {got:?}, directory {want:?}"
            );
        }
    }
    // The newest: a slot the directory serves, with the directory's root.
    let newest = match answer(r, "getStateRoot", json!([])) {
        Ok(v) => v,
        Err(c) if e.nothing && (c == codes::NOTHING_PUBLISHED || e.codes.contains(&c)) => return,
        Err(c) => panic!("{what}: getStateRoot [] answered {c}"),
    };
    let slot = newest["slot"].as_u64().unwrap();
    assert_eq!(Ok(newest.clone()), answer(&bed.local, "getStateRoot", json!([slot])), "{what}: newest");
    if !e.damaged.contains(&(SLOTS - 1)) {
        assert_eq!(slot, SLOTS - 1, "{what}: newest");
    }
    // A range lists verified roots only: each the directory's, every undamaged slot among them.
    let listed = answer(r, "getStateRoots", json!([0, SLOTS - 1])).unwrap();
    let want = answer(&bed.local, "getStateRoots", json!([0, SLOTS - 1])).unwrap();
    let want: BTreeMap<u64, &Value> =
        want.as_array().unwrap().iter().map(|v| (v["slot"].as_u64().unwrap(), v)).collect();
    let mut seen = BTreeSet::new();
    for v in listed.as_array().unwrap() {
        let slot = v["slot"].as_u64().unwrap();
        assert_eq!(Some(&v), want.get(&slot), "{what}: getStateRoots lists slot {slot}");
        seen.insert(slot);
    }
    for slot in 0..SLOTS {
        assert!(seen.contains(&slot) || e.damaged.contains(&slot), "{what}: getStateRoots leaves out slot {slot}");
    }
}

/// Whether `r` answers everything as the directory does again (with `logs`, the log methods
/// too).
fn recovered(bed: &Bed, r: &Server, logs: bool) -> bool {
    let methods: &[&str] = if logs {
        &["getStateRoot", "getAccountProof", "getRootRecord", "getSlotVotes"]
    } else {
        &["getStateRoot", "getAccountProof"]
    };
    (0..SLOTS).all(|slot| {
        let key = b58(&bed.key(slot));
        methods.iter().all(|m| {
            let params = match *m {
                "getAccountProof" => json!([key, {"slot": slot}]),
                _ => json!([slot]),
            };
            answer(r, m, params.clone()) == answer(&bed.local, m, params)
        })
    }) && answer(r, "getStateRoot", json!([])) == answer(&bed.local, "getStateRoot", json!([]))
}

/// One damage: what was done (for messages), the objects to put back, and what to expect.
struct Case<'a> {
    what: String,
    touched: Vec<String>,
    expect: Expect<'a>,
}

fn flip(bytes: &mut [u8], rng: &mut ChaCha8Rng, range: std::ops::Range<usize>) -> usize {
    let at = rng.random_range(range);
    bytes[at] ^= 1 << rng.random_range(0..8);
    at
}

/// Every slot: a head that cannot be trusted may refuse any of them.
fn all() -> BTreeSet<u64> {
    (0..SLOTS).collect()
}

fn damage(bed: &Bed, rng: &mut ChaCha8Rng, kind: usize) -> Case<'static> {
    let head_bytes = bed.pristine[MANIFEST_NAME].to_vec();
    let mut head = bed.head();
    let head_json = |h: &Head| serde_json::to_vec_pretty(h).unwrap();
    let in_head: Vec<(usize, u64)> = head.snapshots.iter().enumerate().map(|(i, o)| (i, o.seq)).collect();
    match kind {
        // A bit flipped anywhere in the head.
        0 => {
            let mut b = head_bytes.clone();
            let len = b.len();
            let at = flip(&mut b, rng, 0..len);
            bed.put(MANIFEST_NAME, b);
            Case {
                what: format!("head bit flip at byte {at}"),
                touched: vec![MANIFEST_NAME.into()],
                expect: Expect { damaged: all(), codes: EITHER, strict_proofs: false, logs: all(), nothing: true },
            }
        }
        // A field of a snapshot entry changed, the JSON still valid: the slot's own entry is
        // refused (its root, parent, gap or identity are the object's to say); its size,
        // checksum or chain refuse the slots reaching it.
        1 => {
            let (i, seq) = in_head[rng.random_range(0..in_head.len())];
            let o = &mut head.snapshots[i];
            let field = rng.random_range(0..5);
            let what = match field {
                0 => {
                    let mut r = [0u8; 32];
                    rng.fill(&mut r);
                    o.root = root_hex(&r);
                    "root"
                }
                1 => {
                    o.parent = Some(o.parent.map_or(7, |p| p + 3));
                    "parent"
                }
                2 => {
                    o.checksum = checksum_hex(rng.random());
                    "checksum"
                }
                3 => {
                    o.size += 8;
                    "size"
                }
                _ => {
                    o.gap = Some(aldb_objstore::manifest::WriterGap { after: o.slot.checked_sub(2) });
                    "gap"
                }
            };
            let slot = o.slot;
            bed.put(MANIFEST_NAME, head_json(&head));
            let damaged = match field {
                0 | 1 | 4 => BTreeSet::from([slot]),
                _ => bed.reaching(seq),
            };
            Case {
                what: format!("head entry of sequence {seq} (slot {slot}): {what} changed"),
                touched: vec![MANIFEST_NAME.into()],
                expect: Expect { damaged, codes: DAMAGED, strict_proofs: false, logs: BTreeSet::new(), nothing: false },
            }
        }
        // An entry naming an object the bucket does not hold, with an invented root, as the
        // newest slot: never listed, announced or served, the newest served stays the last.
        2 => {
            let last = head.snapshots.last().unwrap().clone();
            let mut r = [0u8; 32];
            rng.fill(&mut r);
            let seq = last.seq + 1;
            let slot = SLOTS + 3;
            head.snapshots.push(aldb_objstore::manifest::SnapshotObject {
                name: aldb_format::format::file_name(seq as u32, slot),
                seq,
                slot,
                oldest_seq: seq,
                root: root_hex(&r),
                parent: Some(SLOTS - 1),
                ..last
            });
            bed.put(MANIFEST_NAME, head_json(&head));
            Case {
                what: format!("head names slot {slot} whose object does not exist"),
                touched: vec![MANIFEST_NAME.into()],
                expect: Expect {
                    damaged: BTreeSet::new(),
                    codes: MISSING,
                    strict_proofs: false,
                    logs: BTreeSet::new(),
                    nothing: false,
                },
            }
        }
        // A valid head padded past the bound.
        3 => {
            let mut b = head_bytes.clone();
            let end = b.len() - 1;
            b.splice(end..end, std::iter::repeat_n(b' ', 5 << 20));
            bed.put(MANIFEST_NAME, b);
            Case {
                what: "head of 5 MiB".into(),
                touched: vec![MANIFEST_NAME.into()],
                expect: Expect { damaged: all(), codes: DAMAGED, strict_proofs: false, logs: all(), nothing: true },
            }
        }
        // A sealed manifest segment flipped or deleted: the manifest is refused whole.
        4 => {
            let segs = bed.names("manifest/", ".json");
            let name = segs[rng.random_range(0..segs.len())].clone();
            let what = if rng.random_bool(0.5) {
                let mut b = bed.pristine[&name].to_vec();
                let len = b.len();
                flip(&mut b, rng, 0..len);
                bed.put(&name, b);
                "flipped"
            } else {
                bed.delete(&name);
                "deleted"
            };
            Case {
                what: format!("sealed segment {name} {what}"),
                touched: vec![name],
                expect: Expect { damaged: all(), codes: EITHER, strict_proofs: false, logs: all(), nothing: true },
            }
        }
        // A snapshot object flipped (header, body or footer), deleted or emptied.
        5 => {
            let snaps: Vec<String> = bed.names("", ".snap");
            let name = snaps[rng.random_range(0..snaps.len())].clone();
            let seq: u64 = name[..10].parse().unwrap();
            let (what, codes) = match rng.random_range(0..4) {
                0 => {
                    let mut b = bed.pristine[&name].to_vec();
                    let at = flip(&mut b, rng, 0..128);
                    bed.put(&name, b);
                    (format!("header bit flip at {at}"), DAMAGED)
                }
                1 => {
                    let mut b = bed.pristine[&name].to_vec();
                    let len = b.len();
                    let at = flip(&mut b, rng, 128..len - 16);
                    bed.put(&name, b);
                    (format!("bit flip at {at} of {len}"), DAMAGED)
                }
                2 => {
                    bed.delete(&name);
                    ("deleted".to_string(), MISSING)
                }
                _ => {
                    bed.put(&name, Vec::new());
                    ("emptied".to_string(), MISSING)
                }
            };
            Case {
                what: format!("snapshot object {name}: {what}"),
                touched: vec![name],
                expect: Expect {
                    damaged: bed.reaching(seq),
                    codes,
                    strict_proofs: true,
                    logs: BTreeSet::new(),
                    nothing: false,
                },
            }
        }
        // A record-log or vote-log object flipped, truncated or deleted: the replica starts,
        // serves the snapshots as before and the logs' intact entries, and the whole logs once the
        // object is repaired (a copy made of the damaged object is fetched again).
        _ => {
            let logs: Vec<String> = match kind {
                6 => bed.names("records/", ".log").into_iter().chain(bed.names("votes/", ".log")).collect(),
                _ => bed.names("records/", ".log"),
            };
            let name = logs[rng.random_range(0..logs.len())].clone();
            let what = match rng.random_range(0..3) {
                0 => {
                    let mut b = bed.pristine[&name].to_vec();
                    let len = b.len();
                    let at = flip(&mut b, rng, 0..len);
                    bed.put(&name, b);
                    format!("flipped at byte {at} of {len}")
                }
                1 => {
                    let mut b = bed.pristine[&name].to_vec();
                    let len = b.len();
                    b.truncate(rng.random_range(1..len));
                    let cut = b.len();
                    bed.put(&name, b);
                    format!("truncated to {cut} of {len} bytes")
                }
                _ => {
                    bed.delete(&name);
                    "deleted".to_string()
                }
            };
            // The slots its entries name: from its first to the next segment's; the votes on a
            // slot land in the block after it, so the slot before its first too.
            let first = |n: &str| -> u64 { n.rsplit('-').next().unwrap().trim_end_matches(".log").parse().unwrap() };
            let dir = name.split('/').next().unwrap().to_string();
            let next = bed.names(&dir, ".log").iter().map(|n| first(n)).find(|f| *f > first(&name)).unwrap_or(SLOTS);
            // An old slot's vote evidence is read from the bucket's segments covering its bank
            // and the blocks of the 32 slots after it, refused whole when one of them does not verify.
            let from = if dir == "votes" { 0 } else { first(&name).saturating_sub(1) };
            let logs: BTreeSet<u64> = (from..next).collect();
            Case {
                what: format!("log object {name} {what}"),
                touched: vec![name],
                expect: Expect { damaged: BTreeSet::new(), codes: &[], strict_proofs: false, logs, nothing: false },
            }
        }
    }
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Every root notification received so far: `(slot, root)`.
fn announced(rt: &tokio::runtime::Runtime, ws: &mut Ws) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut subscribed = false;
    while let Ok(Some(Ok(m))) = rt.block_on(async { tokio::time::timeout(Duration::from_millis(50), ws.next()).await })
    {
        let Message::Text(t) = m else { continue };
        let v: Value = serde_json::from_str(&t).unwrap();
        subscribed |= v["id"] == 1 && v["result"].is_u64();
        if v["method"] == "rootNotification" {
            let r = &v["params"]["result"];
            out.push((r["slot"].as_u64().unwrap(), r["root"].as_str().unwrap().to_string()));
        }
    }
    assert!(subscribed, "the root subscription was not taken");
    out
}

#[test]
fn a_replica_serves_announces_and_caches_only_what_it_verified() {
    let Some(bed) = Bed::new() else { return };
    let running_cache = tempfile::tempdir().unwrap();
    let running = bed.start_replica(running_cache.path());
    wait_until("the running replica", WAIT, || recovered(&bed, &running, true));
    let (mut ws, _) = running.rt.block_on(tokio_tungstenite::connect_async(&running.ws_url)).unwrap();
    let sub = json!({"jsonrpc": "2.0", "id": 1, "method": "rootSubscribe", "params": []});
    running.rt.block_on(ws.send(Message::text(sub.to_string()))).unwrap();

    let mut rng = ChaCha8Rng::seed_from_u64(0x25);
    // Every kind at least twice, head flips more (they land anywhere), and log objects often
    // (kind 7: the record log, whose one segment kind 6 picks rarely).
    let kinds: Vec<usize> =
        [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 3, 4, 4, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 7, 7, 7].to_vec();
    for (n, &kind) in kinds.iter().enumerate() {
        let case = damage(&bed, &mut rng, kind);
        let what = format!("case {n}: {}", case.what);
        let fresh_cache = tempfile::tempdir().unwrap();
        let fresh = bed.start_replica(fresh_cache.path());
        check(&bed, &fresh, &case.expect, &format!("{what} (fresh replica)"));
        if kind == 2 {
            let e = fresh.err("getStateRoot", json!([SLOTS + 3]), codes::SLOT_FILE_MISSING);
            assert!(e["data"]["file"].as_str().unwrap().contains(&format!("{:020}.snap", SLOTS + 3)), "{e}");
        }
        let running_expect = Expect { strict_proofs: false, ..case.expect };
        check(&bed, &running, &running_expect, &format!("{what} (running replica)"));
        bed.repair(&case.touched);
        // Both recover by themselves, the logs too: a copy made of a damaged object is replaced.
        wait_until(&format!("{what}: the fresh replica recovering"), WAIT, || recovered(&bed, &fresh, true));
        wait_until(&format!("{what}: the running replica recovering"), WAIT, || recovered(&bed, &running, true));
    }

    // The running replica announced only roots the directory serves.
    let roots: BTreeMap<u64, String> = (0..SLOTS).map(|s| (s, b58(&bed.model.root(s)))).collect();
    for (slot, root) in announced(&running.rt, &mut ws) {
        assert_eq!(roots.get(&slot), Some(&root), "announced slot {slot} root {root}");
    }
    let m = running.metrics();
    assert!(m.contains("aldb_cache_manifest_refused_total"), "{m}");
}

#[test]
fn a_damaged_cache_file_is_fetched_again_and_counted() {
    let Some(bed) = Bed::new() else { return };
    let cache = tempfile::tempdir().unwrap();
    let r = bed.start_replica(cache.path());
    wait_until("the replica", WAIT, || recovered(&bed, &r, true));
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let cached: Vec<std::path::PathBuf> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "snap"))
        .collect();
    assert!(cached.len() as u64 >= SLOTS, "{cached:?}");
    // While running: a flipped byte under the reader is found by the proof checks, and the
    // slot's files are fetched again.
    for p in cached.iter().take(4) {
        let mut b = std::fs::read(p).unwrap();
        let len = b.len();
        flip(&mut b, &mut rng, 128..len - 32);
        std::fs::write(p, b).unwrap();
    }
    assert!(recovered(&bed, &r, false), "a running replica answers from damaged cache files");
    drop(r);
    // Across a restart: size and footer unchanged, the bytes not; adopted never, fetched again.
    for p in cached.iter().skip(4).take(4) {
        if let Ok(mut b) = std::fs::read(p) {
            let len = b.len();
            flip(&mut b, &mut rng, 0..len - 32);
            std::fs::write(p, b).unwrap();
        }
    }
    let r = bed.start_replica(cache.path());
    assert!(recovered(&bed, &r, false), "a restarted replica adopted damaged cache files");
    let m = r.metrics();
    assert!(metric(&m, "aldb_cache_damaged_total") >= 1.0, "{m}");
}

/// Flips a bit of every segment file of the copy of `log` in `cache`; returns their names as
/// objects.
fn flip_copies(cache: &std::path::Path, log: &str, rng: &mut ChaCha8Rng) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(cache.join(log)).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if !name.ends_with(".log") || name.starts_with('.') {
            continue;
        }
        let mut b = std::fs::read(&p).unwrap();
        let len = b.len();
        // Past the segment header: inside an entry, whose own checksum no longer holds.
        flip(&mut b, rng, 16..len);
        std::fs::write(&p, b).unwrap();
        out.push(format!("{log}/{name}"));
    }
    assert!(!out.is_empty(), "no copied {log} segment");
    out
}

#[test]
fn a_log_copy_damaged_on_the_cache_disk_is_fetched_again_and_served_without_a_restart() {
    let Some(bed) = Bed::new() else { return };
    let cache = tempfile::tempdir().unwrap();
    let r = bed.start_replica(cache.path());
    wait_until("the replica", WAIT, || recovered(&bed, &r, true));
    let mut rng = ChaCha8Rng::seed_from_u64(0x1a9);
    // The bucket's objects intact, their copies flipped after they were verified and read.
    let mut flipped = flip_copies(cache.path(), "records", &mut rng);
    flipped.extend(flip_copies(cache.path(), "votes", &mut rng));
    let copy_of = |name: &str| std::fs::read(cache.path().join(name)).unwrap_or_default();
    // Each copy is found damaged, counted, fetched again and replaced by the bucket's bytes.
    wait_until("the damaged copies replaced", WAIT, || flipped.iter().all(|n| copy_of(n) == bed.pristine[n]));
    wait_until("every answer as the directory's", WAIT, || recovered(&bed, &r, true));
    let m = r.metrics();
    let n = flipped.len() as f64;
    assert!(metric(&m, "aldb_cache_damaged_total") >= n, "{flipped:?}\n{m}");
    assert!(metric(&m, "aldb_cache_log_repaired_total") >= n, "{flipped:?}\n{m}");
    assert_eq!(metric(&m, "aldb_cache_log_damaged_total"), 0.0, "the bucket's objects are intact\n{m}");
}

#[test]
fn a_file_deleted_from_a_directory_is_named_not_answered_as_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let config = WriterConfig { keep_slots: 1000, refresh_slots: 8, direct_io: false, ..WriterConfig::new(dir.path()) };
    let mut model = Model::new(config, 7);
    model.commit_random(120);
    for _ in 1..SLOTS {
        model.commit_random(12);
    }
    model.flush();
    let s = Server::start(dir.path());
    let infos: Vec<(u64, u32)> =
        (0..SLOTS).map(|slot| (slot, s.service.as_ref().unwrap().hyades().slot(Some(slot)).unwrap().seq)).collect();
    // A delta in the middle of a chain: the slots after it up to the next full file reach it.
    let (gone_slot, gone_seq) = infos[10];
    let name = aldb_format::format::file_name(gone_seq, gone_slot);
    std::fs::remove_file(dir.path().join(&name)).unwrap();
    let s = Server::start(dir.path());
    let mut named = 0;
    for (slot, seq) in infos {
        let file = dir.path().join(aldb_format::format::file_name(seq, slot));
        let oldest = if file.exists() {
            let b = std::fs::read(&file).unwrap();
            aldb_format::format::Header::decode(&b[..128]).unwrap().oldest_seq
        } else {
            seq
        };
        if slot == gone_slot {
            // Its own file is gone: as the pruner leaves it, the slot has no file.
            let code = s.call("getStateRoot", json!([slot]))["error"]["code"].as_i64();
            assert!(code.is_some(), "slot {slot}");
        } else if oldest <= gone_seq && gone_seq < seq {
            let e = s.err("getStateRoot", json!([slot]), codes::SLOT_FILE_MISSING);
            assert!(e["data"]["file"].as_str().unwrap().contains(&format!("{gone_seq:010}")), "{e}");
            named += 1;
        } else {
            assert_eq!(s.ok("getStateRoot", json!([slot]))["value"]["root"], b58(&model.root(slot)), "slot {slot}");
        }
    }
    assert!(named > 0, "no slot reaches the deleted file");
}

/// A loopback proxy in front of SeaweedFS that, once stalled, accepts connections and reads
/// requests but never forwards or answers them (a stalled store, as a hung load balancer or a
/// frozen node behaves), until released; then it drops the connections it held.
struct StallingProxy {
    endpoint: String,
    stalled: tokio::sync::watch::Sender<bool>,
    /// The first bytes of each request held.
    held: Arc<std::sync::Mutex<Vec<String>>>,
}

impl StallingProxy {
    fn start(rt: &tokio::runtime::Runtime, upstream: &str) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let upstream = upstream.trim_start_matches("http://").trim_end_matches('/').to_string();
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let (stalled, watch) = tokio::sync::watch::channel(false);
        let held = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = held.clone();
        rt.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, mut stall, seen) = (upstream.clone(), watch.clone(), seen.clone());
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { return };
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let down = tokio::spawn(async move { tokio::io::copy(&mut sr, &mut cw).await });
                    let mut buf = vec![0u8; 64 << 10];
                    loop {
                        let n = match cr.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if *stall.borrow() {
                            seen.lock().unwrap().push(String::from_utf8_lossy(&buf[..n.min(256)]).into_owned());
                            let _ = stall.wait_for(|s| !*s).await;
                            break;
                        }
                        if sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    down.abort();
                });
            }
        });
        Self { endpoint, stalled, held }
    }

    fn stall(&self, on: bool) {
        self.stalled.send_replace(on);
    }

    fn held(&self) -> Vec<String> {
        self.held.lock().unwrap().clone()
    }
}

#[test]
fn a_stalled_store_answers_a_cold_query_within_the_fetch_wait_and_serves_the_rest() {
    let Some(bed) = Bed::new() else { return };
    let proxy = StallingProxy::start(&bed.rt, &bed.weed.options().endpoint.unwrap());
    let cache = tempfile::tempdir().unwrap();
    let bucket = aldb_objstore::BucketOptions { endpoint: Some(proxy.endpoint.clone()), ..bed.weed.options() };
    let fetch_wait = Duration::from_secs(5);
    let r = Server::start_with(cache.path(), |c| {
        c.store = Some(hyades::StoreConfig {
            url: URL.into(),
            bucket,
            cache_bytes: 1 << 30,
            vote_archive_bytes: aldb_objstore::DEFAULT_VOTE_ARCHIVE_BYTES,
            fetch_wait,
        });
        c.poll_interval = Duration::from_millis(20);
        c.vote_keep_slots = 4;
        c.record_keep = 1000;
    });
    let newest = SLOTS - 1;
    let proof = |slot: u64| ("getAccountProof", json!([b58(&bed.key(slot)), {"slot": slot}]));
    let same = |(m, p): (&str, Value)| answer(&r, m, p.clone()) == answer(&bed.local, m, p);
    wait_until("the replica", WAIT, || same(proof(newest)) && same(("getRootRecord", json!([newest]))));
    // Slot 5's chain (slots 0 to 5) shares no file with the newest slot's (16 to 19): cold.
    let cold = 5;

    proxy.stall(true);
    let asked = std::time::Instant::now();
    std::thread::scope(|s| {
        let query = s.spawn(|| {
            let (m, p) = proof(cold);
            (r.call(m, p), asked.elapsed())
        });
        wait_until("the cold query reaching the stalled store", WAIT, || {
            proxy.held().iter().any(|h| h.contains(".snap"))
        });
        // While that query waits on the store, everything that needs no request to it is served.
        for ask in [("getStateRoot", json!([cold])), ("getStateRoots", json!([0, newest])), proof(newest)] {
            assert!(same(ask.clone()), "{ask:?} while the store stalls");
        }
        assert!(same(("getRootRecord", json!([newest]))), "getRootRecord while the store stalls");
        assert!(!query.is_finished(), "the cold query was answered before the store answered anything");
        let (resp, took) = query.join().unwrap();
        assert_eq!(resp["error"]["code"], -32603, "{resp}");
        // Answered by the server's bound (the client gives up at 30 s, and would have failed the
        // call), not by the object store client's retries (about 180 s).
        assert!(took >= fetch_wait && took < Duration::from_secs(30), "answered after {took:?}");
    });

    // Once the store answers again, the slot is served, without a restart.
    proxy.stall(false);
    wait_until("the cold slot once the store answers", WAIT, || same(proof(cold)));
}
