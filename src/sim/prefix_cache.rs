//! The simulator's prefix cache: fixed-size blocks of token ids, chained hashes, LRU.
//!
//! Like vLLM's automatic prefix caching, a block is reusable only when every block
//! before it matches too, and at least one prompt token is always computed.

use std::collections::{BTreeMap, HashMap};

use crate::hash::FnvWriter;

#[derive(Debug)]
pub struct PrefixCache {
    capacity: usize,
    block_size: usize,
    tick: u64,
    /// block hash → last use tick
    blocks: HashMap<u64, u64>,
    /// last use tick → block hash (the LRU order)
    lru: BTreeMap<u64, u64>,
}

/// The outcome of one lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookup {
    /// Prompt tokens served from the cache.
    pub cached_tokens: u64,
}

impl PrefixCache {
    pub fn new(capacity_blocks: u64, block_size: u64) -> PrefixCache {
        PrefixCache {
            capacity: capacity_blocks as usize,
            block_size: block_size.max(1) as usize,
            tick: 0,
            blocks: HashMap::new(),
            lru: BTreeMap::new(),
        }
    }

    /// Counts the cached prefix of `tokens`, then stores every full block of them.
    pub fn lookup_and_insert(&mut self, tokens: &[u32]) -> Lookup {
        let full_blocks = tokens.len() / self.block_size;
        // At least one token must be computed, so the last token is never served from cache.
        let servable = tokens.len().saturating_sub(1) / self.block_size;
        let mut hash = 0u64;
        let mut hits = 0usize;
        let mut still_matching = true;
        for b in 0..full_blocks {
            let mut w = FnvWriter(hash ^ 0x9e37_79b9_7f4a_7c15);
            for t in &tokens[b * self.block_size..(b + 1) * self.block_size] {
                std::io::Write::write_all(&mut w, &t.to_le_bytes()).expect("hashing cannot fail");
            }
            hash = w.0;
            if still_matching && b < servable && self.blocks.contains_key(&hash) {
                hits += 1;
            } else {
                still_matching = false;
            }
            self.touch(hash);
        }
        Lookup {
            cached_tokens: (hits * self.block_size) as u64,
        }
    }

    fn touch(&mut self, hash: u64) {
        if self.capacity == 0 {
            return;
        }
        self.tick += 1;
        if let Some(old) = self.blocks.insert(hash, self.tick) {
            self.lru.remove(&old);
        }
        self.lru.insert(self.tick, hash);
        while self.blocks.len() > self.capacity {
            let Some((_, victim)) = self.lru.pop_first() else {
                break;
            };
            self.blocks.remove(&victim);
        }
    }

    /// Share of the cache in use, 0 to 1.
    pub fn usage(&self) -> f64 {
        if self.capacity == 0 {
            0.0
        } else {
            self.blocks.len() as f64 / self.capacity as f64
        }
    }

    pub fn reset(&mut self) {
        self.blocks.clear();
        self.lru.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_prefixes_hit_by_whole_blocks() {
        let mut c = PrefixCache::new(100, 4);
        let a: Vec<u32> = (0..10).collect();
        assert_eq!(c.lookup_and_insert(&a).cached_tokens, 0);
        // Same 10 tokens: 2 full blocks stored; both servable (9 / 4 = 2).
        assert_eq!(c.lookup_and_insert(&a).cached_tokens, 8);
        // Exactly 8 tokens: only one block may be served, the last token must be computed.
        assert_eq!(c.lookup_and_insert(&a[..8]).cached_tokens, 4);
        // A different first block breaks the chain even if later blocks match.
        let mut b = a.clone();
        b[0] = 99;
        assert_eq!(c.lookup_and_insert(&b).cached_tokens, 0);
        c.reset();
        assert_eq!(c.lookup_and_insert(&a).cached_tokens, 0);
    }

    #[test]
    fn least_recently_used_blocks_are_evicted() {
        let mut c = PrefixCache::new(2, 2);
        let a = [1, 2, 3, 4, 5];
        let b = [7, 8, 9, 10, 11];
        c.lookup_and_insert(&a);
        c.lookup_and_insert(&b); // evicts a's blocks
        assert_eq!(c.lookup_and_insert(&a).cached_tokens, 0);
        assert!((c.usage() - 1.0).abs() < 1e-12);
    }
}
