//! The packed form's limits and its equivalence with the tree form.

use super::*;
use proptest::prelude::*;

fn filled(n: usize) -> ZSet {
    let mut z = ZSet::new();
    for i in 0..n {
        z.insert(format!("m{i}").as_bytes(), i as f64);
    }
    z
}

#[test]
fn packed_up_to_the_entry_limit_then_tree_for_good() {
    assert!(filled(PACKED_ENTRIES - 1).is_packed());
    let mut z = filled(PACKED_ENTRIES);
    assert!(z.is_packed());
    // Changing a score or re-adding a member is no growth.
    assert_eq!(z.insert(b"m0", -1.0), Some(0.0));
    assert!(z.is_packed());
    z.insert(b"one-more", 1e9);
    assert!(!z.is_packed());
    assert_eq!(z.len(), PACKED_ENTRIES + 1);
    assert_eq!(z.rank(b"m0"), Some(0));
    assert_eq!(z.rank(b"one-more"), Some(PACKED_ENTRIES));
    // Never back, as Redis.
    z.pop_ends(true, PACKED_ENTRIES);
    assert_eq!(z.len(), 1);
    assert!(!z.is_packed());
    assert!(!filled(PACKED_ENTRIES + 1).is_packed());
}

#[test]
fn a_long_member_unpacks() {
    let mut z = filled(3);
    z.insert(&[b'x'; PACKED_VALUE], 0.5);
    assert!(z.is_packed());
    z.insert(&[b'y'; PACKED_VALUE + 1], 0.5);
    assert!(!z.is_packed());
    assert_eq!(z.score(&[b'y'; PACKED_VALUE + 1]), Some(0.5));
    assert_eq!(z.rank(&[b'x'; PACKED_VALUE]), Some(1));
    assert_eq!(z.len(), 5);
}

#[test]
fn packed_costs_less_and_memory_returns_to_empty() {
    let empty = ZSet::new().memory();
    let mut small = filled(10);
    let mut large = filled(10);
    large.unpack();
    assert!(
        small.memory() * 2 < large.memory(),
        "{} {}",
        small.memory(),
        large.memory()
    );
    for i in 0..10 {
        let m = format!("m{i}");
        assert!(small.remove(m.as_bytes()).is_some());
        assert!(large.remove(m.as_bytes()).is_some());
    }
    assert_eq!((small.heap, large.heap), (0, 0));
    assert!(small.memory() >= empty);
}

/// Everything a reader sees, in a comparable form.
fn view(z: &ZSet, probe: &[u8], bound: f64) -> impl PartialEq + std::fmt::Debug {
    let all: Vec<(Vec<u8>, u64)> = z.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).collect();
    let back: Vec<Vec<u8>> = z.iter().rev().map(|(m, _)| m.to_vec()).collect();
    let from: Vec<Vec<u8>> = z.from_score(bound).map(|(m, _)| m.to_vec()).collect();
    let down: Vec<Vec<u8>> = z.down_from_score(bound).map(|(m, _)| m.to_vec()).collect();
    (
        all,
        back,
        from,
        down,
        z.len(),
        z.rank(probe),
        z.score(probe).map(f64::to_bits),
        z.heap,
    )
}

fn score_of(pick: u8) -> f64 {
    match pick {
        0 => f64::INFINITY,
        1 => f64::NEG_INFINITY,
        2 => -0.0,
        p => f64::from(p % 7) - 3.0,
    }
}

proptest! {
    #[test]
    fn packed_and_tree_forms_agree(ops in proptest::collection::vec((0u8..5, proptest::collection::vec(0u8..4, 0..3), any::<u8>(), 0usize..4), 0..120)) {
        let mut packed = ZSet::new();
        let mut tree = ZSet::new();
        tree.unpack();
        for (op, member, pick, count) in &ops {
            let score = score_of(*pick);
            match op {
                0 | 1 => prop_assert_eq!(
                    packed.insert(member, score).map(f64::to_bits),
                    tree.insert(member, score).map(f64::to_bits)
                ),
                2 => prop_assert_eq!(packed.remove(member).map(f64::to_bits), tree.remove(member).map(f64::to_bits)),
                3 => prop_assert_eq!(packed.pop_ends(true, *count), tree.pop_ends(true, *count)),
                _ => prop_assert_eq!(packed.pop_ends(false, *count), tree.pop_ends(false, *count)),
            }
            prop_assert!(packed.is_packed());
            let bound = score_of(pick.wrapping_add(1));
            prop_assert_eq!(view(&packed, member, bound), view(&tree, member, bound));
        }
    }
}
