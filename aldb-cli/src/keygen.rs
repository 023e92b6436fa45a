//! `aldb keygen`: Solana-format keypair files, so scripts and tests can sign root records
//! without the Solana CLI.

use std::io::Write;
use std::path::PathBuf;

use aldb_snapshot::records::Signer;
use aldb_verify::json::hash_to_base58;
use anyhow::{Context, Result, bail};
use clap::Args;
use rand::Rng;

/// Options of `aldb keygen`.
#[derive(Args, Debug)]
pub(crate) struct KeygenArgs {
    /// The keypair file to write: a JSON array of 64 numbers, the secret seed then the public
    /// key, as `solana-keygen` writes them.
    out: PathBuf,
    /// The 32-byte secret seed in hex (64 digits), for a deterministic key; random otherwise.
    #[arg(long)]
    seed_hex: Option<String>,
    /// Replace OUT if it exists.
    #[arg(long)]
    force: bool,
}

fn parse_seed(hex: &str) -> Result<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("--seed-hex must be 64 hex digits (32 bytes), got {:?}", hex);
    }
    let mut seed = [0u8; 32];
    for (i, byte) in seed.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).context("--seed-hex is not hex")?;
    }
    Ok(seed)
}

/// The keypair file's text for `seed`: its 64 bytes as a JSON array.
pub(crate) fn keypair_json(seed: &[u8; 32]) -> String {
    let mut bytes = seed.to_vec();
    bytes.extend_from_slice(&Signer::from_seed(seed).identity());
    let items: Vec<String> = bytes.iter().map(u8::to_string).collect();
    format!("[{}]", items.join(","))
}

/// Writes the keypair and prints its public key (base58).
pub(crate) fn run(a: KeygenArgs) -> Result<()> {
    let seed = match &a.seed_hex {
        Some(h) => parse_seed(h)?,
        None => {
            let mut s = [0u8; 32];
            rand::rng().fill(&mut s);
            s
        }
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if a.force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A secret key: readable by its owner only.
        options.mode(0o600);
    }
    let mut f = options.open(&a.out).with_context(|| {
        if a.out.exists() && !a.force {
            format!("{} exists; pass --force to replace it", a.out.display())
        } else {
            format!("cannot create {}", a.out.display())
        }
    })?;
    f.write_all(keypair_json(&seed).as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    println!("{}", hash_to_base58(&Signer::from_seed(&seed).identity()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_and_keypairs_read_back() {
        assert!(parse_seed("00").is_err());
        assert!(parse_seed(&"zz".repeat(32)).is_err());
        let seed = parse_seed(&"0a".repeat(32)).expect("valid hex");
        assert_eq!(seed, [10; 32]);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("k.json");
        std::fs::write(&path, keypair_json(&seed)).expect("write");
        let signer = Signer::from_keypair_file(&path).expect("a valid keypair file");
        assert_eq!(signer.identity(), Signer::from_seed(&seed).identity());
    }
}
