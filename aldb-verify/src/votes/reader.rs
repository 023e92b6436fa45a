//! A bounds-checked cursor over wire bytes with Solana's two variable-length integers.

/// Reads a byte string front to back; every read fails rather than running past the end.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    /// The offset of the next byte.
    pub(crate) fn position(&self) -> usize {
        self.at
    }

    /// Whether every byte was read.
    pub(crate) fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// The next byte, without consuming it.
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let out = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(out)
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }

    /// `solana-short-vec`'s length: 7 bits a byte, at most 3 bytes, at most `u16::MAX`, and only
    /// the shortest encoding (a zero byte after the first is an alias and refused).
    pub(crate) fn short_vec(&mut self) -> Option<usize> {
        let mut value: u32 = 0;
        for nth in 0..3 {
            let byte = self.u8()?;
            if byte == 0 && nth > 0 {
                return None;
            }
            if nth == 2 && byte & 0x80 != 0 {
                return None;
            }
            value |= u32::from(byte & 0x7f) << (7 * nth);
            if value > u32::from(u16::MAX) {
                return None;
            }
            if byte & 0x80 == 0 {
                return Some(value as usize);
            }
        }
        None
    }

    /// `solana-serde-varint`'s u64: LEB128, at most 10 bytes, the value within `u64`, and no
    /// trailing zero byte (so only the shortest encoding).
    pub(crate) fn varint(&mut self) -> Option<u64> {
        let mut value: u128 = 0;
        for nth in 0..10 {
            let byte = self.u8()?;
            value |= u128::from(byte & 0x7f) << (7 * nth);
            if byte & 0x80 == 0 {
                if byte == 0 && nth > 0 {
                    return None;
                }
                return u64::try_from(value).ok();
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_vec_is_canonical() {
        assert_eq!(Reader::new(&[0x7f]).short_vec(), Some(0x7f));
        assert_eq!(Reader::new(&[0x80, 0x01]).short_vec(), Some(0x80));
        assert_eq!(Reader::new(&[0xff, 0xff, 0x03]).short_vec(), Some(0xffff));
        assert_eq!(Reader::new(&[0xff, 0xff, 0x04]).short_vec(), None);
        assert_eq!(Reader::new(&[0x80, 0x00]).short_vec(), None);
        assert_eq!(Reader::new(&[0x80, 0x80, 0x80]).short_vec(), None);
        assert_eq!(Reader::new(&[0x80]).short_vec(), None);
    }

    #[test]
    fn varint_is_canonical() {
        assert_eq!(Reader::new(&[0]).varint(), Some(0));
        assert_eq!(Reader::new(&[0xac, 0x02]).varint(), Some(300));
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(Reader::new(&max).varint(), Some(u64::MAX));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(Reader::new(&over).varint(), None);
        assert_eq!(Reader::new(&[0x81, 0x00]).varint(), None);
        assert_eq!(Reader::new(&[0x80; 11]).varint(), None);
    }
}
