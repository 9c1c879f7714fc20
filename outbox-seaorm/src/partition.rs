//! The partition of an outbox row: `fnv1a_64(aggregate_id) % partitions`.
//!
//! Relays own partitions (through leases), so the rows of one aggregate are published by one
//! relay at a time and stay in order. The partition is computed once, at insert, and stored
//! in the row. Other languages compute the same number with 64-bit FNV-1a:
//!
//! - hash the **UTF-8 bytes** of the aggregate id (no terminator, no normalisation);
//! - start from the offset basis `0xcbf29ce484222325` (14695981039346656037);
//! - for each byte: `hash ^= byte; hash = hash * 0x100000001b3` (1099511628211), wrapping
//!   (modulo 2^64);
//! - partition = `hash % partitions`, unsigned 64-bit remainder.
//!
//! ```
//! use outbox_seaorm::partition::{fnv1a_64, partition_of};
//!
//! assert_eq!(fnv1a_64(b""), 0xcbf29ce484222325);
//! assert_eq!(fnv1a_64(b"a"), 0xaf63dc4c8601ec8c);
//! assert_eq!(partition_of("order-42", 64), (fnv1a_64(b"order-42") % 64) as u32);
//! ```
//!
//! The same in Python: `h = 0xcbf29ce484222325; for b in s.encode(): h = ((h ^ b) *
//! 0x100000001b3) % 2**64`.

/// FNV-1a 64-bit offset basis.
pub const FNV1A_64_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64-bit prime.
pub const FNV1A_64_PRIME: u64 = 0x0000_0100_0000_01b3;
/// Default number of partitions.
pub const DEFAULT_PARTITIONS: u32 = 64;

/// 64-bit FNV-1a of `bytes`.
pub const fn fnv1a_64(bytes: &[u8]) -> u64 {
    let mut hash = FNV1A_64_OFFSET_BASIS;
    let mut index = 0;
    while index < bytes.len() {
        hash ^= bytes[index] as u64;
        hash = hash.wrapping_mul(FNV1A_64_PRIME);
        index += 1;
    }
    hash
}

/// The partition of `aggregate_id` among `partitions` (which must be at least 1; 0 is
/// treated as 1).
pub fn partition_of(aggregate_id: &str, partitions: u32) -> u32 {
    let partitions = u64::from(partitions.max(1));
    // The remainder is below `partitions`, a u32.
    u32::try_from(fnv1a_64(aggregate_id.as_bytes()) % partitions).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_reference_vectors() {
        // From the FNV reference test suite (fnv1a64).
        assert_eq!(fnv1a_64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn partitions_are_in_range_and_stable() {
        for id in [
            "",
            "a",
            "order-1",
            "ünïcode",
            "0191a0b2-0000-7000-8000-000000000000",
        ] {
            for partitions in [1, 2, 7, 64, 1024] {
                let p = partition_of(id, partitions);
                assert!(p < partitions);
                assert_eq!(p, partition_of(id, partitions));
            }
        }
        assert_eq!(partition_of("x", 0), 0);
    }

    proptest::proptest! {
        /// Any aggregate id, any partition count: in range, the same on every call, and
        /// equal to the specification in the module documentation written a second way
        /// (modulo 2^64 in 128-bit arithmetic, as the Python line computes it).
        #[test]
        fn partition_is_the_documented_fnv1a(id in "\\PC{0,40}", partitions in 1u32..=4096) {
            let mut reference: u128 = 0xcbf2_9ce4_8422_2325;
            for byte in id.as_bytes() {
                reference = ((reference ^ u128::from(*byte)) * 0x0100_0000_01b3) % (1u128 << 64);
            }
            let p = partition_of(&id, partitions);
            proptest::prop_assert!(p < partitions);
            proptest::prop_assert_eq!(p, partition_of(&id, partitions));
            proptest::prop_assert_eq!(u128::from(p), reference % u128::from(partitions));
        }
    }
}
