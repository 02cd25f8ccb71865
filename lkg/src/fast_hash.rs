//! A fast non-cryptographic hasher (the Fx hash of rustc) for maps keyed by commit ids and test
//! names. Commit ids are SHA-1/SHA-256 digests and test names come from the index, so nobody picks
//! keys to collide; std's SipHash costs most of a lookup on keys of 40 bytes.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FxHasher {
    hash: u64,
}

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            // The length in the spare top byte keeps "ab" and "ab\0" apart.
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            word[7] = rest.len() as u8;
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;

    fn hash(value: &str) -> u64 {
        let mut hasher = FxHasher::default();
        value.hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn equal_strings_hash_alike_and_different_ones_apart() {
        assert_eq!(hash("7c48c2bd72b9bf5c44d21d7338cc7bea77d0ad2a"), hash("7c48c2bd72b9bf5c44d21d7338cc7bea77d0ad2a"));
        assert_ne!(hash("7c48c2bd72b9bf5c44d21d7338cc7bea77d0ad2a"), hash("7c48c2bd72b9bf5c44d21d7338cc7bea77d0ad2b"));
        assert_ne!(hash("ab"), hash("ab\0"));
    }
}
