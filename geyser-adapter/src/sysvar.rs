//! Parent links from the SlotHashes sysvar.
//!
//! Slots replayed from the local ledger at startup arrive with no slot status, so nothing names
//! their parents. But every bank but genesis writes the SlotHashes sysvar when it is created,
//! and that write's newest entry is `(parent slot, parent bank hash)`. Reading the parent from
//! it links replayed slots exactly, even those rooted during startup for which no `Rooted`
//! ever comes.

/// The SlotHashes sysvar address, `SysvarS1otHashes111111111111111111111111111`.
pub const SLOT_HASHES_SYSVAR: [u8; 32] = [
    0x06, 0xa7, 0xd5, 0x17, 0x19, 0x2f, 0x0a, 0xaf, 0xc6, 0xf2, 0x65, 0xe3, 0xfb, 0x77, 0xcc, 0x7a, 0xda, 0x82, 0xc5,
    0x29, 0xd0, 0xbe, 0x3b, 0x13, 0x6e, 0x2d, 0x00, 0x55, 0x20, 0x00, 0x00, 0x00,
];

/// The parent slot a SlotHashes write at `slot` names: the first entry of its bincode
/// `Vec<(u64, [u8; 32])>`, which is kept newest first. `None` when the data is too short, the
/// list is empty (genesis), or the entry is not below `slot`.
pub fn slot_hashes_parent(slot: u64, data: &[u8]) -> Option<u64> {
    slot_hashes_newest(slot, data).map(|(parent, _)| parent)
}

/// The newest entry of a SlotHashes write at `slot`: the parent slot and, when the data holds
/// all 32 bytes of it, the parent's bank hash. `None` in the cases [`slot_hashes_parent`] gives
/// `None`.
pub fn slot_hashes_newest(slot: u64, data: &[u8]) -> Option<(u64, Option<[u8; 32]>)> {
    let len = u64::from_le_bytes(data.get(0..8)?.try_into().ok()?);
    if len == 0 {
        return None;
    }
    let parent = u64::from_le_bytes(data.get(8..16)?.try_into().ok()?);
    let hash = data.get(16..48).and_then(|h| <[u8; 32]>::try_from(h).ok());
    (parent < slot).then_some((parent, hash))
}

/// SlotHashes data naming `parent` as the newest entry, in the validator's layout (for tests
/// and tools; the hash is zero).
pub fn slot_hashes_data(parent: u64) -> Vec<u8> {
    slot_hashes_data_with_hash(parent, [0u8; 32])
}

/// SlotHashes data naming `parent` with bank hash `hash` as the newest entry (for tests and
/// tools).
pub fn slot_hashes_data_with_hash(parent: u64, hash: [u8; 32]) -> Vec<u8> {
    let mut d = Vec::with_capacity(8 + 40);
    d.extend_from_slice(&1u64.to_le_bytes());
    d.extend_from_slice(&parent.to_le_bytes());
    d.extend_from_slice(&hash);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_newest_entry() {
        let mut d = 3u64.to_le_bytes().to_vec();
        for s in [41u64, 40, 38] {
            d.extend_from_slice(&s.to_le_bytes());
            d.extend_from_slice(&[7u8; 32]);
        }
        assert_eq!(slot_hashes_parent(42, &d), Some(41));
        assert_eq!(slot_hashes_parent(42, &slot_hashes_data(39)), Some(39));
        assert_eq!(slot_hashes_newest(42, &d), Some((41, Some([7u8; 32]))));
        assert_eq!(slot_hashes_newest(42, &slot_hashes_data_with_hash(40, [9; 32])), Some((40, Some([9; 32]))));
        assert_eq!(slot_hashes_newest(42, &d[..20]), Some((41, None)));
    }

    #[test]
    fn rejects_short_empty_and_impossible_data() {
        assert_eq!(slot_hashes_parent(5, &[]), None);
        assert_eq!(slot_hashes_parent(5, &1u64.to_le_bytes()), None);
        assert_eq!(slot_hashes_parent(5, &0u64.to_le_bytes()), None);
        assert_eq!(slot_hashes_parent(5, &slot_hashes_data(5)), None);
        assert_eq!(slot_hashes_parent(5, &slot_hashes_data(9)), None);
    }
}
