//! The set's three forms against a model, and the moments it changes form.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeSet;

#[test]
fn integers_then_strings_then_many() {
    let mut s = Set::new();
    for i in 0..200 {
        assert!(s.insert(i.to_string().as_bytes()));
    }
    assert_eq!(s.encoding(), "intset");
    assert!(!s.insert(b"7"));
    assert!(!s.contains(b"07"));
    assert!(s.insert(b"07"));
    assert_eq!(
        s.encoding(),
        "hashtable",
        "201 members pass the packed limit"
    );

    let mut s = Set::new();
    s.insert(b"-5");
    s.insert(b"300000");
    assert_eq!(s.encoding(), "intset");
    assert!(s.insert(b"x"));
    assert_eq!(s.encoding(), "listpack");
    let mut got: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
    got.sort();
    assert_eq!(got, [b"-5".to_vec(), b"300000".to_vec(), b"x".to_vec()]);
    assert!(s.insert(&[b'z'; 65]));
    assert_eq!(s.encoding(), "hashtable");
    // One way only: removing the long member leaves a hash set, as Redis.
    assert!(s.remove(&[b'z'; 65]));
    assert_eq!(s.encoding(), "hashtable");
}

#[test]
fn an_intset_holds_up_to_its_limit() {
    let mut s = Set::new();
    for i in 0..INTS_ENTRIES {
        s.insert(i.to_string().as_bytes());
    }
    assert_eq!(s.encoding(), "intset");
    assert_eq!(s.take_index(0).as_deref(), Some(&b"0"[..]));
    s.insert(b"0");
    s.insert(b"100000");
    assert_eq!(s.encoding(), "hashtable");
    assert_eq!(s.len(), INTS_ENTRIES + 1);
}

#[test]
fn packed_sets_are_small() {
    let mut s = Set::new();
    for i in 0..10 {
        s.insert(format!("member:{i}").as_bytes());
    }
    assert_eq!(s.encoding(), "listpack");
    assert!(s.memory() <= 140, "{}", s.memory());
}

proptest! {
    #[test]
    fn behaves_as_a_set_in_every_form(ops in proptest::collection::vec((0u8..4, 0u32..600, 0usize..80), 0..700)) {
        let mut s = Set::new();
        let mut model = BTreeSet::new();
        for (op, n, len) in ops {
            let m: Vec<u8> = match len % 5 {
                0 => format!("{n:0>width$}", width = len / 5).into_bytes(),
                1 | 2 => n.to_string().into_bytes(),
                _ => vec![b'a' + (n % 26) as u8; len],
            };
            match op {
                0 | 1 => prop_assert_eq!(s.insert(&m), model.insert(m.clone())),
                2 => prop_assert_eq!(s.remove(&m), model.remove(&m)),
                _ => {
                    if !model.is_empty() {
                        let i = n as usize % model.len();
                        let picked = s.get_index(i).map(|m| m.to_vec());
                        let taken = s.take_index(i).map(Vec::from);
                        prop_assert_eq!(&picked, &taken);
                        prop_assert!(model.remove(&taken.unwrap()));
                    }
                }
            }
            prop_assert_eq!(s.len(), model.len());
            prop_assert_eq!(s.contains(&m), model.contains(&m));
        }
        let got: BTreeSet<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
        prop_assert_eq!(got, model);
    }
}

#[test]
fn a_hash_set_counts_its_members_bytes() {
    let mut s = Set::new();
    for i in 0..1000 {
        s.insert(format!("member-{i}").as_bytes());
    }
    let Form::Table(t) = &s.form else {
        panic!("1000 members make a hash set")
    };
    assert_eq!(t.heap, 10 * 8 + 990 * 16, "8 or 16 bytes a member");
    for i in 0..1000 {
        assert!(s.remove(format!("member-{i}").as_bytes()));
    }
    let Form::Table(t) = &s.form else {
        panic!("a hash set stays one")
    };
    assert_eq!(t.heap, 0);
}

#[test]
fn a_count_given_up_front_picks_the_form() {
    let mut s = Set::new();
    s.expect(3, b"7");
    assert_eq!(s.encoding(), "intset");
    let mut s = Set::new();
    s.expect(3, b"x");
    s.insert(b"x");
    assert_eq!(s.encoding(), "listpack");
    s.expect(129, b"y");
    assert_eq!(
        s.encoding(),
        "hashtable",
        "129 members may come: a hash set now"
    );
    assert!(s.contains(b"x"));
    let mut s = Set::new();
    s.expect(513, b"1");
    s.insert(b"1");
    assert_eq!(s.encoding(), "hashtable");
}

#[test]
fn a_hash_set_emptied_by_spop_is_rebuilt_small() {
    let mut s = Set::new();
    for i in 0..600 {
        s.insert(i.to_string().as_bytes());
    }
    while s.len() > 3 {
        s.take_index(0);
    }
    assert_eq!(s.encoding(), "hashtable");
    s.rebuild_small();
    // Built from the packed form, as Redis's new set is: integers do not make it an intset.
    assert_eq!(s.encoding(), "listpack");
    assert_eq!(s.len(), 3);
}
