//! Bloom filters: one per index table (`<uuid>.bloomfilter`) over stream hashes, and the stream
//! existence filter (`stream-existence/streamExistenceFilter.dat`) over stream names.
//!
//! File format: magic `ANNALBLM` | u64 bit count | u32 probes | u32 0 | bits as u64 LE words |
//! u32 crc32 of everything before it.

/// A fixed-size bloom filter keyed by 64-bit hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bloom {
    bits: Vec<u64>,
    probes: u32,
}

const MAGIC: &[u8; 8] = b"ANNALBLM";

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Bloom {
    /// A filter of at least `bits` bits (rounded up to 64) with `probes` probes per key.
    pub fn new(bits: u64, probes: u32) -> Bloom {
        let words = bits.div_ceil(64).max(1) as usize;
        Bloom { bits: vec![0; words], probes: probes.max(1) }
    }

    /// A filter sized for `n` keys at about 1% false positives.
    pub fn for_keys(n: usize) -> Bloom {
        Bloom::new((n as u64).max(64) * 10, 7)
    }

    fn positions(&self, key: u64) -> impl Iterator<Item = u64> + '_ {
        let m = self.bits.len() as u64 * 64;
        let h1 = mix(key);
        let h2 = mix(h1 ^ 0x9e37_79b9_7f4a_7c15) | 1;
        (0..self.probes as u64).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % m)
    }

    /// Adds a key.
    pub fn insert(&mut self, key: u64) {
        let ps: Vec<u64> = self.positions(key).collect();
        for p in ps {
            self.bits[(p / 64) as usize] |= 1 << (p % 64);
        }
    }

    /// False means the key was certainly never inserted.
    pub fn may_contain(&self, key: u64) -> bool {
        self.positions(key).all(|p| self.bits[(p / 64) as usize] & (1 << (p % 64)) != 0)
    }

    /// Memory held, in bytes.
    pub fn size_bytes(&self) -> usize {
        self.bits.len() * 8
    }

    /// Serialises the filter.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + self.bits.len() * 8 + 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.bits.len() as u64 * 64).to_le_bytes());
        out.extend_from_slice(&self.probes.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        for w in &self.bits {
            out.extend_from_slice(&w.to_le_bytes());
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses a serialised filter, checking its checksum.
    pub fn decode(b: &[u8]) -> Result<Bloom, &'static str> {
        if b.len() < 28 || &b[0..8] != MAGIC {
            return Err("not a bloom filter file");
        }
        let (body, crc) = b.split_at(b.len() - 4);
        if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().unwrap_or_default()) {
            return Err("bloom filter checksum mismatch");
        }
        let nbits = u64::from_le_bytes(b[8..16].try_into().unwrap_or_default());
        let probes = u32::from_le_bytes(b[16..20].try_into().unwrap_or_default());
        let words = &body[24..];
        if nbits == 0 || nbits % 64 != 0 || words.len() as u64 * 8 != nbits || probes == 0 {
            return Err("bloom filter size fields are inconsistent");
        }
        let bits =
            words.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect();
        Ok(Bloom { bits, probes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let mut b = Bloom::for_keys(10_000);
        for k in 0..10_000u64 {
            b.insert(k * 7919);
        }
        assert!((0..10_000u64).all(|k| b.may_contain(k * 7919)));
        let fp = (0..10_000u64).filter(|k| b.may_contain(k * 7919 + 1)).count();
        assert!(fp < 300, "{fp} false positives");
        let d = Bloom::decode(&b.encode()).unwrap();
        assert_eq!(d, b);
        let mut bad = b.encode();
        bad[30] ^= 1;
        assert!(Bloom::decode(&bad).is_err());
    }
}
