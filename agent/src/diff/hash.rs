//! A small, fast, non-cryptographic hasher (the Fx hash of rustc) for the stack tables.
//!
//! Keys are our own interned ids, never attacker-chosen, so SipHash's flooding resistance buys nothing
//! and costs a large share of the per-sample time.

use std::hash::{BuildHasherDefault, Hasher};

/// `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// rustc's Fx hash: rotate, xor, multiply per word.
#[derive(Clone, Copy, Debug, Default)]
pub struct FxHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
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
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        // hashbrown indexes buckets by the low bits, which a multiply mixes worst: rotate the well-mixed
        // high bits down (as rustc-hash 2 does).
        self.0.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, BuildHasherDefault};

    #[test]
    fn equal_slices_hash_equal_and_different_ones_differ() {
        let b = BuildHasherDefault::<FxHasher>::default();
        let a: &[u32] = &[1, 2, 3];
        assert_eq!(b.hash_one(a), b.hash_one([1u32, 2, 3].as_slice()));
        assert_ne!(b.hash_one(a), b.hash_one([1u32, 2, 4].as_slice()));
        assert_ne!(b.hash_one(a), b.hash_one([1u32, 2].as_slice()));
    }
}
