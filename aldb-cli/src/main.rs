//! `aldb`: compute state roots, produce and check proofs from account files.

mod accounts;
mod epochs;
mod keygen;
mod remote;
mod simulate;
mod trust;
mod votes;

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use aldb_core::{BulkBuilder, Claim, Config, Pleiades, Proof};
use aldb_verify::json::hash_to_base58;
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::accounts::{decode_key, read_chunks};
use crate::trust::Trust;

/// Accounts hashed per batch while reading a file.
const CHUNK: usize = 65_536;

/// The longest proof text `aldb verify` reads: a proof has at most 256 siblings of about 60
/// bytes of JSON each, so 1 MiB is ample and a mistaken or hostile input costs nothing more.
const MAX_PROOF_BYTES: u64 = 1 << 20;

#[derive(Parser)]
#[command(name = "aldb", version, about = "aldb state commitments: roots, proofs, verification")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the state root of an account file (JSON lines; later lines win, lamports 0 deletes).
    Root {
        /// File of `{"pubkey","lamports","owner","executable","data"}` lines; `-` for stdin.
        file: PathBuf,
        /// Worker threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Print the JSON proof of PUBKEY (inclusion or exclusion) against the file's root.
    Prove {
        /// Account file, as for `root`.
        file: PathBuf,
        /// Base58 pubkey to prove.
        pubkey: String,
        /// Worker threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Drive the benchmark workload through Pleiades and the snapshot writer into a directory,
    /// with a root record per slot.
    Simulate(simulate::SimulateArgs),
    /// Write a Solana-format keypair file (to sign root records); prints its public key.
    Keygen(keygen::KeygenArgs),
    /// Check a JSON proof for PUBKEY against ROOT; prints what it proves, fails if invalid.
    Verify {
        /// Base58 state root.
        #[arg(long)]
        root: String,
        /// Base58 pubkey the proof is about.
        #[arg(long)]
        pubkey: String,
        /// File holding the proof JSON; stdin when absent or `-`.
        proof: Option<PathBuf>,
    },
    /// Fetch PUBKEY's account and proof from a Hyades service and verify them locally against
    /// a root you trust; fails unless the proof holds against it and commits to the account.
    ///
    /// Name what to trust: --root R, or --identities FILE --threshold K (the slot's root record
    /// must carry valid signatures of at least K of FILE's identities, and its root must be the
    /// proof's), or --trust-server (the service's own root; a warning says so on stderr).
    ///
    /// Or --trust votes --validators FILE (with --url, or --evidence FILE): the account is
    /// accepted because vote accounts of FILE holding more than 2/3 of its stake voted for the
    /// slot with a bank hash that commits to the root (a chain running the aldb consensus patch,
    /// docs/SPEC.md §10); the service's getSlotVotes gives the votes. With --checkpoint FILE
    /// instead of --validators, the set is each epoch's, followed from FILE on votes alone
    /// (§11), the client's state kept in a file.
    Proof {
        /// The service's JSON-RPC URL, such as http://127.0.0.1:8899/.
        #[arg(long, required_unless_present = "evidence")]
        url: Option<String>,
        /// Base58 pubkey to fetch.
        pubkey: String,
        /// Slot to ask about (default: the newest published).
        #[arg(long)]
        slot: Option<u64>,
        /// Base58 state root you already trust for that slot.
        #[arg(long, conflicts_with_all = ["identities", "trust_server"])]
        root: Option<String>,
        /// File of validator identities (base58 public keys): a JSON array, or one per line
        /// with blank lines and `#` comments ignored.
        #[arg(long, requires = "threshold", conflicts_with = "trust_server")]
        identities: Option<PathBuf>,
        /// How many distinct identities of --identities must have signed the slot's record.
        #[arg(long, requires = "identities")]
        threshold: Option<usize>,
        /// With --identities: the cluster's genesis hash (base58); a record of another cluster
        /// is refused.
        #[arg(long, requires = "identities")]
        genesis_hash: Option<String>,
        /// With --identities: the lowest commitment level of the record accepted, `confirmed`
        /// (default: either) or `finalized`. Hyades serves a slot's strongest record.
        #[arg(long, requires = "identities")]
        commitment: Option<String>,
        /// Take the service's own root as the truth (for trying things out: a lying service
        /// is caught only if it contradicts itself).
        #[arg(long)]
        trust_server: bool,
        /// What vouches for the root: `votes` (the validators' votes: of the set --validators
        /// names, from --url or --evidence; or of each epoch's set, followed from --checkpoint).
        #[arg(long, value_parser = ["votes"], conflicts_with_all = ["root", "identities", "trust_server"])]
        trust: Option<String>,
        /// With --trust votes: the validator set, a JSON array of
        /// {"voteAccount","authorizedVoter","stake"} or one `VOTE_ACCOUNT AUTHORIZED_VOTER STAKE`
        /// per line (`#` comments allowed).
        #[arg(long, requires = "trust", conflicts_with = "checkpoint")]
        validators: Option<PathBuf>,
        /// With --trust votes: follow the validator set from this checkpoint (docs/SPEC.md §11.5:
        /// the schedule, a set you trust, its time and the trusting period) through every epoch
        /// to the slot's, on the votes of each set for the next (the service's
        /// getEpochTransition), and accept the root on its epoch's set. The client's state is
        /// kept in --state, written crash-safely after every step, so later runs catch up from it.
        #[arg(long, requires_all = ["trust", "url"])]
        checkpoint: Option<PathBuf>,
        /// With --checkpoint: the client's state file (default: the checkpoint's name with
        /// `.state` appended). A frozen client's misbehaviour evidence goes beside it
        /// (`STATE.misbehaviour.json`).
        #[arg(long, requires = "checkpoint")]
        state: Option<PathBuf>,
        /// With --trust votes: the slot's vote evidence for PUBKEY (docs/SPEC.md §10.5) from a
        /// file instead of the service.
        #[arg(long, requires = "trust", conflicts_with_all = ["url", "checkpoint"])]
        evidence: Option<PathBuf>,
        /// With --trust votes: refuse votes cast more than SECONDS before this machine's clock
        /// says it is now, by the time vote accounts holding more than 1/3 of the set's stake
        /// stamped on them. A server may answer the newest slot with an old slot's evidence; this
        /// bounds how old an answer can be (with or without --slot).
        #[arg(long, value_name = "SECONDS", requires = "trust")]
        max_age: Option<u64>,
    },
}

fn open(path: &Path) -> Result<Box<dyn std::io::BufRead>> {
    if path == Path::new("-") {
        return Ok(Box::new(BufReader::new(std::io::stdin())));
    }
    let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    Ok(Box::new(BufReader::new(f)))
}

fn threads(t: Option<usize>) -> usize {
    t.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1)
}

/// Builds the tree of an account file with the bulk builder: equal ranks, so later lines win.
fn build(file: &Path, threads: usize) -> Result<Pleiades> {
    // A file's size bounds its account count well enough to size the layout.
    let expected = std::fs::metadata(file).map(|m| m.len() / 120).unwrap_or(1 << 16);
    let mut builder = BulkBuilder::new(Config::for_leaves(expected, threads))?;
    read_chunks(open(file)?, CHUNK, |chunk| {
        let refs: Vec<_> = chunk.iter().map(|a| a.as_ref()).collect();
        builder.push_accounts(&refs, (0, 0));
    })
    .with_context(|| format!("{}", file.display()))?;
    Ok(builder.finish())
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Root { file, threads: t } => {
            let tree = build(&file, threads(t))?;
            println!("{}", hash_to_base58(&tree.root()));
        }
        Command::Prove { file, pubkey, threads: t } => {
            let key = decode_key("pubkey", &pubkey)?;
            let tree = build(&file, threads(t))?;
            eprintln!("root {}", hash_to_base58(&tree.root()));
            println!("{}", tree.prove_pubkey(&key).to_json_string());
        }
        Command::Simulate(args) => simulate::run(args)?,
        Command::Keygen(args) => keygen::run(args)?,
        Command::Verify { root, pubkey, proof } => {
            let root = decode_key("root", &root)?;
            let key = decode_key("pubkey", &pubkey)?;
            let mut text = String::new();
            let source = proof.unwrap_or_else(|| PathBuf::from("-"));
            let read = open(&source)?
                .take(MAX_PROOF_BYTES + 1)
                .read_to_string(&mut text)
                .with_context(|| format!("cannot read the proof from {}", source.display()))?;
            if read as u64 > MAX_PROOF_BYTES {
                anyhow::bail!("the proof is longer than {MAX_PROOF_BYTES} bytes; no proof is that long");
            }
            let proof = Proof::from_json_str(text.trim()).context("bad proof")?;
            match proof.verify(&root, &key).context("proof rejected")? {
                Claim::Present { value } => println!("present {}", hash_to_base58(&value)),
                Claim::Absent => println!("absent"),
            }
        }
        Command::Proof {
            url,
            pubkey,
            slot,
            root,
            identities,
            threshold,
            genesis_hash,
            commitment,
            trust_server,
            trust,
            validators,
            checkpoint,
            state,
            evidence,
            max_age,
        } => {
            let key = decode_key("pubkey", &pubkey)?;
            if let (Some(_), Some(checkpoint)) = (&trust, checkpoint) {
                let url = url.context("--checkpoint takes the transitions and votes from --url")?;
                let file = epochs::StateFile::new(checkpoint, state);
                let followed = epochs::follow_and_prove(&url, &file, &key, slot)?;
                if let Some(max_age) = max_age {
                    epochs::check_age(&followed, max_age)?;
                }
                println!("{}", epochs::report(&followed));
                return Ok(());
            }
            if trust.is_some() {
                let set = votes::read_validator_set(
                    &validators.context("--trust votes needs --validators FILE or --checkpoint FILE")?,
                )?;
                let verified = match (evidence, url) {
                    (Some(evidence), _) => votes::verify_file(&evidence, &key, slot, &set)?,
                    (None, Some(url)) => votes::fetch_and_verify(&url, &key, slot, &set)?,
                    (None, None) => anyhow::bail!(
                        "--trust votes takes the slot's votes from --url (the service's {}) or --evidence FILE",
                        votes::SLOT_VOTES_METHOD
                    ),
                };
                if let Some(max_age) = max_age {
                    votes::check_age(&verified.0, max_age)?;
                }
                println!("{}", votes::report(&verified.0, verified.1));
                return Ok(());
            }
            let url = url.context("--url is required")?;
            let trust = match (root, identities, threshold, trust_server) {
                (Some(r), None, None, false) => Trust::Root(decode_key("root", &r)?),
                (None, Some(file), Some(k), false) => {
                    let genesis = genesis_hash.as_deref().map(|g| decode_key("genesis hash", g)).transpose()?;
                    let level = match commitment.as_deref() {
                        None => None,
                        Some(c) => Some(aldb_verify::Commitment::from_name(c).with_context(|| {
                            format!("--commitment {:?}: expected confirmed or finalized", accounts::cut(c, 20))
                        })?),
                    };
                    Trust::quorum(&trust::read_identities(&file)?, k, genesis, level)?
                }
                (None, None, None, true) => Trust::Server,
                _ => anyhow::bail!("{}", trust::CHOOSE),
            };
            if matches!(trust, Trust::Server) {
                eprintln!(
                    "warning: --trust-server: the root is the service's own word, not checked against anything you trust; \
                     use --root or --identities/--threshold"
                );
            }
            let verified = remote::fetch_and_verify(&url, &key, slot, &trust)?;
            println!("{}", remote::report(&key, &verified));
        }
    }
    Ok(())
}
