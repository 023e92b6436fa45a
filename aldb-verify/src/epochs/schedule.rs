//! The epoch schedule: agave's `EpochSchedule` (`docs/SPEC.md` §11.2).

use super::EpochError;

/// The fewest slots an epoch has (agave's `MINIMUM_SLOTS_PER_EPOCH`): the first warmup epoch's.
pub const MINIMUM_SLOTS_PER_EPOCH: u64 = 32;

/// Which slots belong to which epoch, fixed in the cluster's genesis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochSchedule {
    /// Slots in each normal epoch.
    pub slots_per_epoch: u64,
    /// How far ahead of an epoch its stakes are fixed, in slots.
    pub leader_schedule_slot_offset: u64,
    /// Whether the first epochs are short (32, 64, ... slots) and grow to `slots_per_epoch`.
    pub warmup: bool,
    /// The first epoch of `slots_per_epoch` slots.
    pub first_normal_epoch: u64,
    /// That epoch's first slot.
    pub first_normal_slot: u64,
}

impl EpochSchedule {
    /// `EpochSchedule::custom`: the warmup fields computed from the other three.
    pub fn new(slots_per_epoch: u64, leader_schedule_slot_offset: u64, warmup: bool) -> Result<Self, EpochError> {
        if slots_per_epoch < MINIMUM_SLOTS_PER_EPOCH {
            return Err(EpochError::Schedule);
        }
        let (first_normal_epoch, first_normal_slot) = if warmup {
            let p = slots_per_epoch.checked_next_power_of_two().ok_or(EpochError::Schedule)?;
            let epoch = u64::from(p.trailing_zeros() - MINIMUM_SLOTS_PER_EPOCH.trailing_zeros());
            (epoch, p - MINIMUM_SLOTS_PER_EPOCH)
        } else {
            (0, 0)
        };
        Ok(EpochSchedule {
            slots_per_epoch,
            leader_schedule_slot_offset,
            warmup,
            first_normal_epoch,
            first_normal_slot,
        })
    }

    /// Checks that the five fields are a schedule `EpochSchedule::custom` makes.
    pub fn validate(&self) -> Result<(), EpochError> {
        let want = EpochSchedule::new(self.slots_per_epoch, self.leader_schedule_slot_offset, self.warmup)?;
        if want == *self { Ok(()) } else { Err(EpochError::Schedule) }
    }

    /// The epoch of `slot`.
    pub fn epoch(&self, slot: u64) -> u64 {
        if slot < self.first_normal_slot {
            // Warmup epoch e holds slots [32 (2^e - 1), 32 (2^(e+1) - 1)): slot / 32 + 1 is in
            // [2^e, 2^(e+1)), the boundaries being multiples of 32.
            let x = slot / MINIMUM_SLOTS_PER_EPOCH + 1;
            u64::from(63 - x.leading_zeros())
        } else {
            // A valid schedule has slots_per_epoch >= 32; max(1) keeps an unvalidated one total.
            self.first_normal_epoch + (slot - self.first_normal_slot) / self.slots_per_epoch.max(1)
        }
    }

    /// The first slot of `epoch`, or `None` past the last slot.
    pub fn first_slot(&self, epoch: u64) -> Option<u64> {
        if epoch <= self.first_normal_epoch {
            let pow = 1u64.checked_shl(u32::try_from(epoch).ok()?)?;
            (pow - 1).checked_mul(MINIMUM_SLOTS_PER_EPOCH)
        } else {
            (epoch - self.first_normal_epoch).checked_mul(self.slots_per_epoch)?.checked_add(self.first_normal_slot)
        }
    }

    /// The epoch whose stakes a bank at `slot` has fixed (`get_leader_schedule_epoch`, saturating
    /// as agave's).
    pub fn leader_schedule_epoch(&self, slot: u64) -> u64 {
        if slot < self.first_normal_slot {
            self.epoch(slot).saturating_add(1)
        } else {
            let ahead = (slot - self.first_normal_slot).saturating_add(self.leader_schedule_slot_offset);
            self.first_normal_epoch.saturating_add(ahead / self.slots_per_epoch.max(1))
        }
    }

    /// The first slot of `epoch` whose bank holds the set of `epoch + 1` (§11.3), or `None` when
    /// it lies past the last slot.
    pub fn next_set_from(&self, epoch: u64) -> Option<u64> {
        let first = self.first_slot(epoch)?;
        if first < self.first_normal_slot {
            return Some(first);
        }
        // Normal slots: leader_schedule_epoch(S) >= epoch + 1 from S = first_slot(epoch + 1) -
        // offset, computed in u128: the next epoch may start past the last slot.
        let next = (u128::from(epoch) + 1).saturating_sub(u128::from(self.first_normal_epoch))
            * u128::from(self.slots_per_epoch)
            + u128::from(self.first_normal_slot);
        let from = next.saturating_sub(u128::from(self.leader_schedule_slot_offset)).max(u128::from(first));
        u64::try_from(from).ok()
    }
}
