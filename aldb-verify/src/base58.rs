//! Base58 (Bitcoin alphabet, the text Solana uses for keys, hashes and signatures) decoding of
//! fixed-length values, and [`Excerpt`], the bounded quoting of outside text in error messages.
//!
//! Generic base58 decoders treat the input as one big number and cost time quadratic in its
//! length, so a megabyte of digits keeps them busy for minutes. Every value this project decodes
//! has a fixed length, and base58 text of `N` bytes is at most [`max_encoded_len`]`(N)`
//! characters long (44 for 32 bytes, 88 for 64), so [`decode_fixed`] refuses anything longer
//! before it looks at a single digit: the work per value is bounded whatever the input. It is
//! `no_std` and allocates nothing.

/// The base58 alphabet, digit values 0 to 57.
const ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// Value of each ASCII byte as a base58 digit, 0xff for bytes outside the alphabet.
const DIGIT: [u8; 128] = {
    let mut t = [0xffu8; 128];
    let mut i = 0;
    while i < ALPHABET.len() {
        t[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// The longest base58 text of `bytes` bytes: the digit count of `256^bytes - 1`, which is
/// `ceil(bytes · log58(256))` (44 for 32 bytes, 88 for 64). All-zero bytes encode as one `1`
/// each, which is never longer.
pub const fn max_encoded_len(bytes: usize) -> usize {
    // log58(256) = 1.365658237309761...; the 12 decimals are exact enough for any length up
    // to 10^9 bytes (checked against real encodings in the tests).
    (bytes as u128 * 1_365_658_237_310).div_ceil(1_000_000_000_000) as usize
}

/// The longest base58 text of a 32-byte hash or public key.
pub const MAX_HASH_LEN: usize = max_encoded_len(32);

/// The longest base58 text of a 64-byte ed25519 signature.
pub const MAX_SIGNATURE_LEN: usize = max_encoded_len(64);

/// Why a string is not the base58 form of a value of the expected length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Base58Error {
    /// A character outside the base58 alphabet, at this byte index of the string.
    InvalidCharacter {
        /// The offending character.
        character: char,
        /// Its byte offset in the string.
        index: usize,
    },
    /// The string is longer than any base58 text of the expected length; refused unread.
    TooLong {
        /// Length of the string in bytes.
        len: usize,
        /// The longest base58 text of the expected length.
        max: usize,
    },
    /// The string decodes, but not to the expected length.
    WrongLength {
        /// Number of bytes it decodes to.
        bytes: usize,
        /// Number of bytes expected.
        expected: usize,
    },
}

impl core::fmt::Display for Base58Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::InvalidCharacter { character, index } => {
                write!(f, "invalid base58 character {character:?} at index {index}")
            }
            Self::TooLong { len, max } => {
                write!(f, "base58 text of {len} bytes is too long (at most {max} for the expected length)")
            }
            Self::WrongLength { bytes, expected } => {
                write!(f, "base58 decodes to {bytes} bytes, expected {expected}")
            }
        }
    }
}

impl core::error::Error for Base58Error {}

/// Decodes base58 text of exactly `N` bytes; text longer than [`max_encoded_len`]`(N)` is
/// refused before decoding, so the work is at most `N · max_encoded_len(N)` byte steps.
///
/// The format is the usual one: each leading `1` is a zero byte, the rest a big-endian number
/// in base 58. The result agrees with the `bs58` crate on every input.
pub fn decode_fixed<const N: usize>(text: &str) -> Result<[u8; N], Base58Error> {
    let max = max_encoded_len(N);
    if text.len() > max {
        return Err(Base58Error::TooLong { len: text.len(), max });
    }
    // The number is kept in `number` with one more byte above it in `top`: text of at most
    // max_encoded_len(N) digits is below 58 · 256^N < 256^(N + 1), so nothing overflows `top`,
    // and a non-zero `top` shows a value longer than N bytes.
    let mut number = [0u8; N];
    let mut top = 0u32;
    let mut leading_ones = 0usize;
    let mut leading = true;
    for (index, character) in text.char_indices() {
        let digit = match u8::try_from(character).ok().and_then(|b| DIGIT.get(usize::from(b))) {
            Some(&d) if d != 0xff => d,
            _ => return Err(Base58Error::InvalidCharacter { character, index }),
        };
        if leading && digit == 0 {
            leading_ones += 1;
            continue;
        }
        leading = false;
        // digit < 58 and every byte < 256, so each step stays below 58 · 256 + 256.
        let mut carry = u32::from(digit);
        for byte in number.iter_mut().rev() {
            let x = u32::from(*byte) * 58 + carry;
            *byte = (x & 0xff) as u8;
            carry = x >> 8;
        }
        top = top * 58 + carry;
    }
    let number_len = if top != 0 { N + 1 } else { N - number.iter().take_while(|b| **b == 0).count() };
    let bytes = leading_ones + number_len;
    if bytes != N {
        return Err(Base58Error::WrongLength { bytes, expected: N });
    }
    // number_len <= N, and the number's own leading zero bytes stand for the leading ones.
    Ok(number)
}

/// Outside text quoted in an error message, cut to its first [`Excerpt::CHARS`] characters
/// (then `…` and its length in bytes), so a message never echoes a megabyte of input. Control
/// characters are escaped as in `{:?}`.
///
/// ```
/// use aldb_verify::Excerpt;
/// assert_eq!(Excerpt("abc").to_string(), "\"abc\"");
/// assert_eq!(Excerpt(&"z".repeat(1000)).to_string(), "\"zzzzzzzzzzzzzzzz…\" (1000 bytes)");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Excerpt<'a>(pub &'a str);

impl Excerpt<'_> {
    /// How many characters of the text are shown.
    pub const CHARS: usize = 16;
}

impl core::fmt::Display for Excerpt<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let text = self.0;
        match text.char_indices().nth(Self::CHARS) {
            None => write!(f, "{text:?}"),
            Some((cut, _)) => {
                f.write_str("\"")?;
                for c in text[..cut].chars() {
                    write!(f, "{}", c.escape_debug())?;
                }
                write!(f, "…\" ({} bytes)", text.len())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::{String, ToString};
    use alloc::vec;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    fn runner(cases: u32, seed: u8) -> TestRunner {
        let config =
            Config { cases, rng_algorithm: RngAlgorithm::ChaCha, failure_persistence: None, ..Config::default() };
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]))
    }

    fn encode(bytes: &[u8]) -> String {
        bs58::encode(bytes).into_string()
    }

    #[test]
    fn the_bound_is_the_length_of_the_largest_value() {
        assert_eq!((MAX_HASH_LEN, MAX_SIGNATURE_LEN), (44, 88));
        for n in 0..=512 {
            let largest = encode(&vec![0xff; n]);
            assert_eq!(largest.len(), max_encoded_len(n), "{n} bytes");
            // No value of n bytes encodes longer: all zeros is n characters.
            assert!(encode(&vec![0; n]).len() <= max_encoded_len(n));
        }
    }

    #[test]
    fn longest_texts_still_decode() {
        assert_eq!(decode_fixed::<32>(&encode(&[0xff; 32])), Ok([0xff; 32]));
        assert_eq!(decode_fixed::<64>(&encode(&[0xff; 64])), Ok([0xff; 64]));
        assert_eq!(decode_fixed::<32>(&"1".repeat(32)), Ok([0; 32]));
        let mut mixed = [0xffu8; 64];
        mixed[..3].fill(0);
        assert_eq!(decode_fixed::<64>(&encode(&mixed)), Ok(mixed));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(decode_fixed::<32>("1111"), Err(Base58Error::WrongLength { bytes: 4, expected: 32 }));
        assert_eq!(decode_fixed::<32>("abc0"), Err(Base58Error::InvalidCharacter { character: '0', index: 3 }));
        assert_eq!(
            decode_fixed::<32>("ab\u{e9}"),
            Err(Base58Error::InvalidCharacter { character: '\u{e9}', index: 2 })
        );
        assert_eq!(decode_fixed::<32>(&"z".repeat(45)), Err(Base58Error::TooLong { len: 45, max: 44 }));
        assert_eq!(decode_fixed::<64>(&"z".repeat(89)), Err(Base58Error::TooLong { len: 89, max: 88 }));
        // The largest digits of the longest allowed length exceed N bytes: a length error, not
        // a silent truncation.
        assert_eq!(decode_fixed::<32>(&"z".repeat(44)), Err(Base58Error::WrongLength { bytes: 33, expected: 32 }));
        assert_eq!(decode_fixed::<64>(&"z".repeat(88)), Err(Base58Error::WrongLength { bytes: 65, expected: 64 }));
        let e = Base58Error::TooLong { len: 1_000_000, max: 44 };
        assert_eq!(e.to_string(), "base58 text of 1000000 bytes is too long (at most 44 for the expected length)");
    }

    #[test]
    fn a_million_digits_are_refused_unread() {
        // Valid digits all the way, so only the length check can refuse it.
        let huge = "2".repeat(1_000_000);
        assert_eq!(decode_fixed::<32>(&huge), Err(Base58Error::TooLong { len: 1_000_000, max: 44 }));
        assert_eq!(decode_fixed::<64>(&huge), Err(Base58Error::TooLong { len: 1_000_000, max: 88 }));
    }

    #[test]
    fn agrees_with_the_bs58_crate() {
        runner(512, 1)
            .run(&any::<[u8; 32]>(), |h| {
                prop_assert_eq!(decode_fixed::<32>(&encode(&h)), Ok(h));
                Ok(())
            })
            .unwrap();
        // Signatures, with runs of leading zero bytes as often as not.
        runner(512, 2)
            .run(&(proptest::collection::vec(any::<u8>(), 64), 0..64usize), |(mut s, zeros)| {
                s[..zeros % 8].fill(0);
                let s: [u8; 64] = s.try_into().unwrap();
                prop_assert_eq!(decode_fixed::<64>(&encode(&s)), Ok(s));
                Ok(())
            })
            .unwrap();
        // Any text around the bounds: accepted exactly when bs58 gives the right length.
        runner(1024, 3)
            .run(&"[1-9A-Za-z]{0,46}", |text| {
                let theirs = bs58::decode(&text).into_vec().ok().and_then(|v| <[u8; 32]>::try_from(v).ok());
                prop_assert_eq!(decode_fixed::<32>(&text).ok(), theirs);
                Ok(())
            })
            .unwrap();
        runner(1024, 4)
            .run(&"[1-9A-Za-z]{80,90}", |text| {
                let theirs = bs58::decode(&text).into_vec().ok().and_then(|v| <[u8; 64]>::try_from(v).ok());
                prop_assert_eq!(decode_fixed::<64>(&text).ok(), theirs);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn excerpts_are_bounded() {
        assert_eq!(Excerpt("").to_string(), "\"\"");
        assert_eq!(Excerpt("a\nb").to_string(), "\"a\\nb\"");
        let sixteen = "x".repeat(16);
        assert_eq!(Excerpt(&sixteen).to_string(), format!("\"{sixteen}\""));
        assert_eq!(Excerpt(&"x".repeat(17)).to_string(), format!("\"{sixteen}…\" (17 bytes)"));
        let long = "é".repeat(1_000_000);
        let shown = Excerpt(&long).to_string();
        assert_eq!(shown, format!("\"{}…\" (2000000 bytes)", "é".repeat(16)));
        assert!(shown.len() < 64);
    }
}
