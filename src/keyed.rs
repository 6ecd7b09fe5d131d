//! A fast keyed hash for in-memory maps whose keys clients choose (the index memtable's stream
//! hashes).
//!
//! The standard `HashMap` hasher (SipHash-1-3) resists crafted keys but costs more than the rest
//! of a memtable insert. [`KeyedState`] mixes each 64-bit word of the key into the state
//! with a bijective finalizer (SplitMix64's) under a secret 64-bit key, so a client that does not
//! know the key cannot aim keys at one bucket. The key comes from the standard library's
//! per-process hash keys, the same source as every `HashMap::new()`; no answer of the node depends
//! on it (such maps are never iterated in their own order where it matters), so simulations stay
//! deterministic.

use std::hash::{BuildHasher, Hasher};

/// Builds [`KeyedHasher`]s under one secret key.
#[derive(Clone, Copy, Debug)]
pub struct KeyedState(u64);

impl KeyedState {
    /// A state under `key` (tests; the node uses [`KeyedState::default`]).
    pub fn with_key(key: u64) -> KeyedState {
        KeyedState(key)
    }
}

impl Default for KeyedState {
    /// A fresh secret key.
    fn default() -> KeyedState {
        KeyedState(std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64))
    }
}

impl BuildHasher for KeyedState {
    type Hasher = KeyedHasher;
    fn build_hasher(&self) -> KeyedHasher {
        KeyedHasher { key: self.0, h: self.0.rotate_left(32) }
    }
}

/// The hasher of [`KeyedState`].
pub struct KeyedHasher {
    key: u64,
    h: u64,
}

impl Hasher for KeyedHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.write_u64(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            // The length tells "ab" from "ab\0" within the last word.
            self.write_u64(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }
    fn write_u8(&mut self, x: u8) {
        self.write_u64(u64::from(x) | 1 << 63);
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
    fn write_u64(&mut self, x: u64) {
        let mut z = self.h ^ x ^ self.key;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        self.h = z ^ (z >> 31);
    }
    fn finish(&self) -> u64 {
        self.h
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn hash<T: std::hash::Hash + ?Sized>(s: KeyedState, v: &T) -> u64 {
        s.hash_one(v)
    }

    #[test]
    fn keys_change_hashes_and_close_inputs_differ() {
        let (a, b) = (KeyedState::with_key(1), KeyedState::with_key(2));
        assert_ne!(hash(a, "stream-1"), hash(b, "stream-1"));
        assert_eq!(hash(a, "stream-1"), hash(a, "stream-1"));
        // Prefixes, trailing zeros and word boundaries give distinct hashes.
        let inputs: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            b"ab".to_vec(),
            b"ab\0".to_vec(),
            b"abcdefgh".to_vec(),
            b"abcdefgh\0".to_vec(),
            b"abcdefghi".to_vec(),
        ];
        let hashes: HashSet<u64> = inputs.iter().map(|i| hash(a, i.as_slice())).collect();
        assert_eq!(hashes.len(), inputs.len());
        // 16-byte keys one bit apart land in different buckets of a small table.
        let low: HashSet<u64> = (0..64u32)
            .map(|bit| {
                let mut id = [0u8; 16];
                id[(bit / 8) as usize] ^= 1 << (bit % 8);
                hash(a, &id) & 1023
            })
            .collect();
        assert!(low.len() > 50, "{}", low.len());
    }
}
