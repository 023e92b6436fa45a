//! Legacy Solana transactions, built and signed by hand: deterministic keys, the system program's
//! and SPL Token's instructions, and the wire format (compact-u16 lengths, message header, account
//! keys, recent blockhash, compiled instructions, then the signatures over the message).

use anyhow::{Context, Result, bail};
use ed25519_dalek::{Signer as _, SigningKey};

/// A 32-byte address.
pub(crate) type Pubkey = [u8; 32];

/// The system program.
pub(crate) const SYSTEM_PROGRAM: Pubkey = [0; 32];
/// SPL Token, in solana-test-validator's genesis.
pub(crate) const TOKEN_PROGRAM: &str = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
/// Size of an SPL Token mint.
pub(crate) const MINT_LEN: u64 = 82;
/// Size of an SPL Token account.
pub(crate) const TOKEN_ACCOUNT_LEN: u64 = 165;

/// A base58 address as 32 bytes. The text often comes from a server, so it goes through the
/// bounded decoder (over-long text refused unread) and errors quote only an excerpt.
pub(crate) fn pubkey(text: &str) -> Result<Pubkey> {
    aldb_verify::base58::decode_fixed::<32>(text)
        .with_context(|| format!("{} is not base58 of 32 bytes", aldb_verify::Excerpt(text)))
}

/// An address in base58.
pub(crate) fn b58(key: &[u8]) -> String {
    bs58::encode(key).into_string()
}

/// A signing key derived from a seed and a label: the same seed always gives the same keys.
pub(crate) fn keypair(seed: u64, label: &str) -> SigningKey {
    let mut h = blake2s_simd::Params::new();
    h.personal(b"aldbscen");
    let mut st = h.to_state();
    st.update(&seed.to_le_bytes());
    st.update(label.as_bytes());
    SigningKey::from_bytes(st.finalize().as_array())
}

/// The address of a signing key.
pub(crate) fn address(k: &SigningKey) -> Pubkey {
    k.verifying_key().to_bytes()
}

/// One account of an instruction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Meta {
    pub(crate) key: Pubkey,
    pub(crate) signer: bool,
    pub(crate) writable: bool,
}

impl Meta {
    pub(crate) fn signer(key: Pubkey) -> Self {
        Self { key, signer: true, writable: true }
    }
    pub(crate) fn writable(key: Pubkey) -> Self {
        Self { key, signer: false, writable: true }
    }
    pub(crate) fn readonly(key: Pubkey) -> Self {
        Self { key, signer: false, writable: false }
    }
    pub(crate) fn readonly_signer(key: Pubkey) -> Self {
        Self { key, signer: true, writable: false }
    }
}

/// An instruction before compilation.
#[derive(Clone, Debug)]
pub(crate) struct Instruction {
    pub(crate) program: Pubkey,
    pub(crate) accounts: Vec<Meta>,
    pub(crate) data: Vec<u8>,
}

/// System program `CreateAccount` (tag 0): `from` pays `lamports` into `new`, which gets `space`
/// zeroed bytes and `owner`. Both sign.
pub(crate) fn create_account(from: Pubkey, new: Pubkey, lamports: u64, space: u64, owner: &Pubkey) -> Instruction {
    let mut data = Vec::with_capacity(52);
    data.extend_from_slice(&0u32.to_le_bytes());
    data.extend_from_slice(&lamports.to_le_bytes());
    data.extend_from_slice(&space.to_le_bytes());
    data.extend_from_slice(owner);
    Instruction { program: SYSTEM_PROGRAM, accounts: vec![Meta::signer(from), Meta::signer(new)], data }
}

/// System program `Transfer` (tag 2).
pub(crate) fn transfer(from: Pubkey, to: Pubkey, lamports: u64) -> Instruction {
    let mut data = Vec::with_capacity(12);
    data.extend_from_slice(&2u32.to_le_bytes());
    data.extend_from_slice(&lamports.to_le_bytes());
    Instruction { program: SYSTEM_PROGRAM, accounts: vec![Meta::signer(from), Meta::writable(to)], data }
}

/// SPL Token `InitializeMint2` (tag 20), no freeze authority.
pub(crate) fn initialize_mint2(token: Pubkey, mint: Pubkey, decimals: u8, authority: &Pubkey) -> Instruction {
    let mut data = vec![20, decimals];
    data.extend_from_slice(authority);
    data.push(0); // COption::None for the freeze authority
    Instruction { program: token, accounts: vec![Meta::writable(mint)], data }
}

/// SPL Token `InitializeAccount3` (tag 18).
pub(crate) fn initialize_account3(token: Pubkey, account: Pubkey, mint: Pubkey, owner: &Pubkey) -> Instruction {
    let mut data = vec![18];
    data.extend_from_slice(owner);
    Instruction { program: token, accounts: vec![Meta::writable(account), Meta::readonly(mint)], data }
}

/// SPL Token `MintTo` (tag 7).
pub(crate) fn mint_to(token: Pubkey, mint: Pubkey, account: Pubkey, authority: Pubkey, amount: u64) -> Instruction {
    let mut data = vec![7];
    data.extend_from_slice(&amount.to_le_bytes());
    let accounts = vec![Meta::writable(mint), Meta::writable(account), Meta::readonly_signer(authority)];
    Instruction { program: token, accounts, data }
}

/// SPL Token `Transfer` (tag 3).
pub(crate) fn token_transfer(token: Pubkey, source: Pubkey, dest: Pubkey, owner: Pubkey, amount: u64) -> Instruction {
    let mut data = vec![3];
    data.extend_from_slice(&amount.to_le_bytes());
    let accounts = vec![Meta::writable(source), Meta::writable(dest), Meta::readonly_signer(owner)];
    Instruction { program: token, accounts, data }
}

/// SPL Token `CloseAccount` (tag 9): the account's lamports go to `dest`, leaving it at zero.
pub(crate) fn close_account(token: Pubkey, account: Pubkey, dest: Pubkey, owner: Pubkey) -> Instruction {
    let accounts = vec![Meta::writable(account), Meta::writable(dest), Meta::readonly_signer(owner)];
    Instruction { program: token, accounts, data: vec![9] }
}

/// Appends `n` as a compact-u16 (7 bits per byte, little-endian, high bit = more follows).
pub(crate) fn compact_u16(out: &mut Vec<u8>, n: usize) -> Result<()> {
    let Ok(mut n) = u16::try_from(n) else { bail!("{n} does not fit a compact-u16") };
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return Ok(());
        }
        out.push(byte | 0x80);
    }
}

/// The legacy message: header, account keys (signers first, writable before read-only in each
/// group, the fee payer first of all), recent blockhash, compiled instructions.
pub(crate) fn message(payer: &Pubkey, ixs: &[Instruction], blockhash: &[u8; 32]) -> Result<(Vec<u8>, Vec<Pubkey>)> {
    let mut metas: Vec<Meta> = vec![Meta::signer(*payer)];
    let mut add = |m: Meta| match metas.iter_mut().find(|x| x.key == m.key) {
        Some(x) => {
            x.signer |= m.signer;
            x.writable |= m.writable;
        }
        None => metas.push(m),
    };
    for ix in ixs {
        for m in &ix.accounts {
            add(*m);
        }
        add(Meta::readonly(ix.program));
    }
    // The payer stays first: a stable sort on the group keeps insertion order within a group.
    metas.sort_by_key(|m| match (m.signer, m.writable) {
        (true, true) => 0,
        (true, false) => 1,
        (false, true) => 2,
        (false, false) => 3,
    });
    let signers = metas.iter().filter(|m| m.signer).count();
    let ro_signed = metas.iter().filter(|m| m.signer && !m.writable).count();
    let ro_unsigned = metas.iter().filter(|m| !m.signer && !m.writable).count();
    let byte = |n: usize| u8::try_from(n).context("too many accounts");
    let mut out = vec![byte(signers)?, byte(ro_signed)?, byte(ro_unsigned)?];
    compact_u16(&mut out, metas.len())?;
    for m in &metas {
        out.extend_from_slice(&m.key);
    }
    out.extend_from_slice(blockhash);
    compact_u16(&mut out, ixs.len())?;
    let index = |k: &Pubkey| -> Result<u8> {
        let i = metas.iter().position(|m| &m.key == k).context("instruction account not in the key list")?;
        byte(i)
    };
    for ix in ixs {
        out.push(index(&ix.program)?);
        compact_u16(&mut out, ix.accounts.len())?;
        for m in &ix.accounts {
            out.push(index(&m.key)?);
        }
        compact_u16(&mut out, ix.data.len())?;
        out.extend_from_slice(&ix.data);
    }
    let signer_keys = metas.iter().filter(|m| m.signer).map(|m| m.key).collect();
    Ok((out, signer_keys))
}

/// A signed transaction's wire bytes and its first signature (the transaction id).
pub(crate) struct Signed {
    pub(crate) wire: Vec<u8>,
    pub(crate) signature: String,
}

/// Builds the message with `signers[0]` as fee payer and signs it with every required signer.
pub(crate) fn sign(signers: &[&SigningKey], ixs: &[Instruction], blockhash: &[u8; 32]) -> Result<Signed> {
    let payer = signers.first().context("a transaction needs a fee payer")?;
    let (msg, required) = message(&address(payer), ixs, blockhash)?;
    let mut wire = Vec::with_capacity(1 + 64 * required.len() + msg.len());
    compact_u16(&mut wire, required.len())?;
    let mut first = None;
    for key in &required {
        let Some(k) = signers.iter().find(|k| &address(k) == key) else {
            bail!("no signing key for required signer {}", b58(key));
        };
        let sig = k.sign(&msg).to_bytes();
        first.get_or_insert(sig);
        wire.extend_from_slice(&sig);
    }
    wire.extend_from_slice(&msg);
    let signature = first.map(|s| b58(&s)).context("no signature")?;
    if wire.len() > 1232 {
        bail!("transaction is {} bytes, over the 1232-byte packet limit", wire.len());
    }
    Ok(Signed { wire, signature })
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::{Signature, Verifier as _};

    use super::*;

    #[test]
    fn compact_u16_matches_the_reference_encodings() {
        for (n, want) in [
            (0usize, vec![0u8]),
            (0x7f, vec![0x7f]),
            (0x80, vec![0x80, 0x01]),
            (0x3fff, vec![0xff, 0x7f]),
            (0x4000, vec![0x80, 0x80, 0x01]),
            (0xffff, vec![0xff, 0xff, 0x03]),
        ] {
            let mut v = Vec::new();
            compact_u16(&mut v, n).unwrap();
            assert_eq!(v, want, "{n}");
        }
        assert!(compact_u16(&mut Vec::new(), 0x10000).is_err());
    }

    #[test]
    fn a_transfer_has_the_legacy_layout_and_a_valid_signature() {
        let payer = keypair(1, "payer");
        let to = address(&keypair(1, "to"));
        let hash = [9u8; 32];
        let tx = sign(&[&payer], &[transfer(address(&payer), to, 5)], &hash).unwrap();
        let w = &tx.wire;
        assert_eq!(w[0], 1, "one signature");
        let msg = &w[65..];
        // header: 1 signer, 0 read-only signed, 1 read-only unsigned (the system program)
        assert_eq!(&msg[..3], &[1, 0, 1]);
        assert_eq!(msg[3], 3, "three keys");
        assert_eq!(&msg[4..36], &address(&payer));
        assert_eq!(&msg[36..68], &to);
        assert_eq!(&msg[68..100], &SYSTEM_PROGRAM);
        assert_eq!(&msg[100..132], &hash);
        // one instruction: program 2, accounts [0, 1], 12 data bytes
        assert_eq!(&msg[132..138], &[1, 2, 2, 0, 1, 12]);
        assert_eq!(&msg[138..142], &2u32.to_le_bytes());
        assert_eq!(&msg[142..150], &5u64.to_le_bytes());
        assert_eq!(msg.len(), 150);
        let sig = Signature::from_bytes(w[1..65].try_into().unwrap());
        payer.verifying_key().verify(msg, &sig).unwrap();
        assert_eq!(tx.signature, b58(&w[1..65]));
    }

    #[test]
    fn signers_come_first_and_the_payer_leads() {
        let payer = keypair(2, "payer");
        let mint = keypair(2, "mint");
        let token = pubkey(TOKEN_PROGRAM).unwrap();
        let ixs = [
            create_account(address(&payer), address(&mint), 1, MINT_LEN, &token),
            initialize_mint2(token, address(&mint), 6, &address(&payer)),
        ];
        let (msg, signers) = message(&address(&payer), &ixs, &[0; 32]).unwrap();
        assert_eq!(signers, vec![address(&payer), address(&mint)]);
        assert_eq!(&msg[..4], &[2, 0, 2, 4]);
        assert!(sign(&[&payer], &ixs, &[0; 32]).is_err(), "the mint's signature is missing");
        assert!(sign(&[&payer, &mint], &ixs, &[0; 32]).is_ok());
    }
}
