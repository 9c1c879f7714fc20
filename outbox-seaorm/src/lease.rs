//! Lease names and the assignment of leases to live relay instances (rendezvous hashing).

use crate::partition::fnv1a_64;

/// The lease of the single SQLite relay.
pub(crate) const RELAY_LEASE: &str = "relay";
/// The lease of outbox retention cleanup.
pub(crate) const OUTBOX_CLEANUP_LEASE: &str = "cleanup/outbox";
/// The lease of inbox retention cleanup.
pub(crate) const INBOX_CLEANUP_LEASE: &str = "cleanup/inbox";

const PARTITION_PREFIX: &str = "partition/";
const WORKER_PREFIX: &str = "worker/";

/// The lease of worker key `key` (job-queue mode): held by one keyed relay at a time.
pub(crate) fn worker_lease(key: &str) -> String {
    format!("{WORKER_PREFIX}{key}")
}

/// The worker key of a worker lease.
pub(crate) fn lease_worker_key(name: &str) -> Option<&str> {
    name.strip_prefix(WORKER_PREFIX)
}

/// The lease of partition `p`.
pub(crate) fn partition_lease(partition: u32) -> String {
    format!("{PARTITION_PREFIX}{partition}")
}

/// The lease of partition `p` of consumer `consumer` (in the consumers' lease table,
/// [`crate::inbox::partitioned`]).
pub(crate) fn consumer_partition_lease(consumer: &str, partition: u32) -> String {
    format!("{consumer}/{PARTITION_PREFIX}{partition}")
}

/// The partition of a partition lease.
pub(crate) fn lease_partition(name: &str) -> Option<i32> {
    name.strip_prefix(PARTITION_PREFIX)?.parse().ok()
}

/// SplitMix64's finaliser: spreads FNV-1a's output over all bits.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn score(lease: &str, instance: &str) -> u64 {
    mix(fnv1a_64(lease.as_bytes()) ^ mix(fnv1a_64(instance.as_bytes())))
}

/// The live instance that should own `lease`: the highest rendezvous score (ties broken by
/// id). When an instance joins or leaves, only the leases it wins or held move.
pub(crate) fn owner_of<'a>(lease: &str, live: &'a [String]) -> Option<&'a str> {
    live.iter()
        .max_by(|a, b| score(lease, a).cmp(&score(lease, b)).then_with(|| b.cmp(a)))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names_round_trip() {
        assert_eq!(lease_partition(&partition_lease(17)), Some(17));
        assert_eq!(lease_partition(RELAY_LEASE), None);
        assert_eq!(lease_partition("partition/x"), None);
        assert_eq!(
            lease_worker_key(&worker_lease("payments")),
            Some("payments")
        );
        assert_eq!(lease_worker_key(&partition_lease(3)), None);
        assert_eq!(lease_partition(&worker_lease("7")), None);
    }

    #[test]
    fn rendezvous_spreads_and_moves_little() {
        let leases: Vec<String> = (0..64).map(partition_lease).collect();
        let three: Vec<String> = ["relay-a", "relay-b", "relay-c"].map(String::from).to_vec();
        let four: Vec<String> = ["relay-a", "relay-b", "relay-c", "relay-d"]
            .map(String::from)
            .to_vec();
        let mut counts = std::collections::BTreeMap::<&str, usize>::new();
        let mut moved = 0;
        for lease in &leases {
            let before = owner_of(lease, &three).unwrap();
            let after = owner_of(lease, &four).unwrap();
            *counts.entry(after).or_default() += 1;
            if before != after {
                assert_eq!(after, "relay-d", "only leases won by the newcomer move");
                moved += 1;
            }
        }
        assert!(moved > 5 && moved < 30, "{moved}");
        assert!(counts.values().all(|&n| n >= 6), "{counts:?}");
        assert_eq!(owner_of("x", &[]), None);
    }

    proptest::proptest! {
        /// Rendezvous assignment of any set of live instances: the owner does not depend on
        /// the order they are listed in, and when one instance leaves only the leases it
        /// owned move (read backwards: when it joins, only the leases it wins move).
        #[test]
        fn rendezvous_owner_is_stable_and_moves_only_what_it_must(
            names in proptest::collection::btree_set("[a-z0-9-]{1,12}", 1..8),
            partitions in proptest::collection::vec(0u32..1024, 1..32),
            rotate in 0usize..8,
        ) {
            let live: Vec<String> = names.into_iter().collect();
            let mut shuffled = live.clone();
            let by = rotate % shuffled.len();
            shuffled.rotate_left(by);
            shuffled.reverse();
            let (leaving, rest) = live.split_first().expect("at least one name");
            for partition in partitions {
                let lease = partition_lease(partition);
                let owner = owner_of(&lease, &live).expect("an owner among live instances");
                proptest::prop_assert_eq!(Some(owner), owner_of(&lease, &shuffled));
                let after = owner_of(&lease, rest);
                if owner != leaving.as_str() {
                    proptest::prop_assert_eq!(after, Some(owner), "a lease moved though its owner stayed");
                }
            }
        }
    }
}
