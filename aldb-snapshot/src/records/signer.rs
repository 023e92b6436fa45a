//! Signing keys read from Solana keypair files.

use std::path::Path;

use aldb_verify::Hash;
use aldb_verify::record::{Attestation, attestation_message};
use ed25519_dalek::{Signer as _, SigningKey};

use super::RecordsError;

/// An ed25519 key that attests records.
pub struct Signer {
    key: SigningKey,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret half.
        f.debug_struct("Signer").field("identity", &bs58::encode(self.identity()).into_string()).finish()
    }
}

impl Signer {
    /// A signer from a 32-byte secret seed.
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Self { key: SigningKey::from_bytes(seed) }
    }

    /// Reads a Solana keypair file: a JSON array of 64 numbers, the secret seed then the public
    /// key. The public half must match the seed, so a damaged file is caught before it signs.
    pub fn from_keypair_file(path: &Path) -> Result<Self, RecordsError> {
        let bad = |reason: String| RecordsError::Keypair { path: path.to_path_buf(), reason };
        let text = read_keypair_text(path).map_err(|e| bad(e.to_string()))?;
        // The parser's message can quote a string from the file: only its start is kept.
        let bytes: Vec<u8> = serde_json::from_str(&text).map_err(|e| {
            bad(format!("not a JSON array of bytes: {}", e.to_string().chars().take(200).collect::<String>()))
        })?;
        let Ok(full) = <[u8; 64]>::try_from(bytes.as_slice()) else {
            return Err(bad(format!("holds {} bytes, a keypair has 64", bytes.len())));
        };
        let mut seed = [0u8; 32];
        seed.copy_from_slice(&full[..32]);
        let signer = Self::from_seed(&seed);
        if signer.identity()[..] != full[32..] {
            return Err(bad("its public key does not belong to its secret key".into()));
        }
        Ok(signer)
    }

    /// The longest keypair file read: a keypair is about 250 bytes of JSON, so anything near
    /// this is not one, and a device such as `/dev/zero` cannot fill memory.
    pub const MAX_KEYPAIR_FILE_BYTES: u64 = 64 << 10;

    /// The public key attestations are checked against.
    pub fn identity(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    /// Attests a record hash.
    pub fn attest(&self, record_hash: &Hash) -> Attestation {
        Attestation {
            identity: self.identity(),
            signature: self.key.sign(&attestation_message(record_hash)).to_bytes(),
        }
    }
}

/// A keypair file's text: a regular file (checked before opening, since opening a FIFO blocks)
/// of at most [`Signer::MAX_KEYPAIR_FILE_BYTES`].
fn read_keypair_text(path: &Path) -> std::io::Result<String> {
    use std::io::{Error, Read};
    if !std::fs::metadata(path)?.is_file() {
        return Err(Error::other("not a regular file"));
    }
    let mut text = String::new();
    std::fs::File::open(path)?.take(Signer::MAX_KEYPAIR_FILE_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > Signer::MAX_KEYPAIR_FILE_BYTES {
        return Err(Error::other(format!("longer than {} bytes, so not a keypair", Signer::MAX_KEYPAIR_FILE_BYTES)));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_keypair_file_and_rejects_a_mismatched_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let signer = Signer::from_seed(&[3; 32]);
        let mut full = vec![3u8; 32];
        full.extend_from_slice(&signer.identity());
        let good = dir.path().join("good.json");
        std::fs::write(&good, serde_json::to_string(&full).expect("json")).expect("write");
        let read = Signer::from_keypair_file(&good).expect("valid keypair");
        assert_eq!(read.identity(), signer.identity());
        let att = read.attest(&[1; 32]);
        assert_eq!(att.verify(&[1; 32]), Ok(()));
        full[40] ^= 1;
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, serde_json::to_string(&full).expect("json")).expect("write");
        assert!(matches!(Signer::from_keypair_file(&bad), Err(RecordsError::Keypair { .. })));
        std::fs::write(&bad, "[1,2,3]").expect("write");
        assert!(matches!(Signer::from_keypair_file(&bad), Err(RecordsError::Keypair { .. })));
    }
}
