//! Prints the base58 pubkey of workload key `INDEX` (default seed, or `SEED` if given), e.g. to
//! ask Hyades about an account `aldb simulate` wrote: `cargo run -p aldb-workload --example pubkey -- 0`.

fn main() {
    let mut args = std::env::args().skip(1);
    let index: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20240611);
    println!("{}", bs58::encode(aldb_workload::pubkey(seed, index)).into_string());
}
