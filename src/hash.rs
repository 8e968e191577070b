//! FNV-1a, 64 bits: a hash that is stable across platforms, Rust versions and runs
//! (unlike std's `DefaultHasher`), for everything that must give the same number on
//! every machine: case ids, plan hashes, the simulator's prefix-cache blocks and its
//! deterministic embeddings. Shared by the planner and the simulator, owned by neither.

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut w = FnvWriter::default();
    w.update(bytes);
    w.0
}

/// An `io::Write` that FNV-hashes what is written, so JSON is hashed without a buffer;
/// `FnvWriter(seed)` continues from another hash.
pub struct FnvWriter(pub u64);

impl Default for FnvWriter {
    fn default() -> Self {
        FnvWriter(OFFSET)
    }
}

impl FnvWriter {
    pub fn update(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(PRIME);
        }
    }
}

impl std::io::Write for FnvWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_the_reference_function() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
        let mut w = FnvWriter::default();
        std::io::Write::write_all(&mut w, b"foo").unwrap();
        std::io::Write::write_all(&mut w, b"bar").unwrap();
        assert_eq!(w.0, fnv1a64(b"foobar"));
    }
}
