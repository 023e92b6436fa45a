//! A message in two borrowed parts, hashed as their concatenation.

use super::BLOCK_LEN;

/// A message given as two borrowed parts and hashed as their concatenation `head || tail`, so a
/// caller with a separately built header never copies the body next to it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Parts<'a> {
    /// The leading bytes.
    pub(crate) head: &'a [u8],
    /// The bytes after `head`.
    pub(crate) tail: &'a [u8],
}

impl Parts<'_> {
    /// Message length in bytes.
    pub(super) fn len(&self) -> usize {
        // Two live slices cannot together exceed the address space, so this never overflows.
        self.head.len() + self.tail.len()
    }

    /// Compressions the message needs: one per started 64-byte block, and one for the empty
    /// message.
    pub(super) fn blocks(&self) -> usize {
        self.len().div_ceil(BLOCK_LEN).max(1)
    }

    /// The message bytes from `start` on, at least 64 of them, when one part holds all of
    /// `start..start + 64`.
    pub(super) fn whole(&self, start: usize) -> Option<&[u8]> {
        let part = match self.head.get(start..) {
            Some(h) if !h.is_empty() => h,
            _ => self.tail.get(start.checked_sub(self.head.len())?..)?,
        };
        (part.len() >= BLOCK_LEN).then_some(part)
    }

    /// Copies the (zero-padded) block of message bytes `start..start + 64` out of the two parts.
    pub(super) fn gather(&self, start: usize) -> [u8; BLOCK_LEN] {
        let mut block = [0u8; BLOCK_LEN];
        self.gather_into(start, &mut block);
        block
    }

    /// Copies message bytes `start..start + 64` (fewer at the end) to the front of `block`,
    /// leaving the rest of it as it was.
    #[inline]
    pub(super) fn gather_into(&self, start: usize, block: &mut [u8; BLOCK_LEN]) {
        let head = self.head.get(start..).unwrap_or_default();
        let h = head.len().min(BLOCK_LEN);
        block[..h].copy_from_slice(&head[..h]);
        let tail = self.tail.get(start.saturating_sub(self.head.len())..).unwrap_or_default();
        let t = tail.len().min(BLOCK_LEN - h);
        block[h..h + t].copy_from_slice(&tail[..t]);
    }
}
