//! The list's two forms against a model, and the moments it changes form.

use super::*;
use proptest::prelude::*;

fn model_bytes(model: &VecDeque<Vec<u8>>) -> usize {
    LISTPACK_EMPTY + model.iter().map(|v| listpack_entry_bytes(v)).sum::<usize>()
}

#[test]
fn listpack_entries_are_sized_as_redis_encodes_them() {
    assert_eq!(listpack_entry_bytes(b"7"), 2);
    assert_eq!(listpack_entry_bytes(b"-1"), 3);
    assert_eq!(listpack_entry_bytes(b"100000"), 5);
    assert_eq!(listpack_entry_bytes(b"abc"), 5);
    assert_eq!(
        listpack_entry_bytes(b"007"),
        5,
        "not an integer's canonical text"
    );
    assert_eq!(listpack_entry_bytes(&[b'x'; 100]), 103);
    assert_eq!(listpack_entry_bytes(&[b'x'; 200]), 204);
}

#[test]
fn converts_past_the_limit_and_back_at_half() {
    let mut l = List::new();
    let value = [b'x'; 100];
    // 103 bytes an entry (2 of header, 1 of back-length); a push passes when the bytes so
    // far and its raw 100 do.
    for _ in 0..79 {
        l.push_back(&value);
    }
    assert!(l.is_packed());
    assert_eq!(l.listpack, 7 + 79 * 103);
    l.push_back(&value);
    assert!(!l.is_packed(), "8144 + 100 bytes pass 8192");
    // Back to packed only at half the limit: 4096 bytes, 39 entries.
    while l.len() > 40 {
        l.pop_front();
        assert!(!l.is_packed());
    }
    l.pop_back();
    assert!(l.is_packed(), "{} bytes", l.listpack);
    assert_eq!(l.len(), 39);
    assert!(l.iter().all(|v| v == value));
}

#[test]
fn one_push_of_many_picks_its_form_once() {
    let mut l = List::new();
    let big = [b'y'; 3000];
    l.push_all(false, &[&big, &big]);
    assert!(l.is_packed());
    l.push_all(true, &[&big, b"a"]);
    assert!(!l.is_packed(), "6010 + 3001 bytes pass 8192");
    assert_eq!(l.get(0), Some(&b"a"[..]));
    assert_eq!(l.get(1), Some(&big[..]));
}

#[test]
fn memory_is_small_while_packed() {
    let mut l = List::new();
    for i in 0..10 {
        l.push_back(format!("member:{i}").as_bytes());
    }
    // 10 entries of 10 bytes, with the buffer's spare quarter.
    assert!(l.memory() <= 140, "{}", l.memory());
}

proptest! {
    #[test]
    fn behaves_as_a_deque_in_either_form(ops in proptest::collection::vec((0u8..9, 0usize..40, 0usize..1500), 0..300)) {
        let mut l = List::new();
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        for (op, i, size) in ops {
            let v: Vec<u8> = if size % 7 == 0 { (size as i64 - 700).to_string().into_bytes() } else { vec![b'a' + (size % 26) as u8; size] };
            match op {
                0 => { l.push_front(&v); model.push_front(v); }
                1 => { l.push_back(&v); model.push_back(v); }
                2 => prop_assert_eq!(l.pop_front().map(Vec::from), model.pop_front()),
                3 => prop_assert_eq!(l.pop_back().map(Vec::from), model.pop_back()),
                4 => { let at = i.min(model.len()); l.insert(at, &v); model.insert(at, v); }
                5 => prop_assert_eq!(l.remove(i).map(Vec::from), model.remove(i)),
                6 => {
                    let ok = i < model.len();
                    prop_assert_eq!(l.set(i, &v), ok);
                    if ok { model[i] = v; }
                }
                7 => {
                    let gone = l.retain(|at, _| at % 4 != 1);
                    let before = model.len();
                    let mut at = 0;
                    model.retain(|_| { let k = at % 4 != 1; at += 1; k });
                    prop_assert_eq!(gone, before - model.len());
                }
                _ => {
                    let end = (i + 20).min(model.len());
                    let start = i.min(end);
                    l.keep_range(i, i + 20);
                    model = model.drain(start..end).collect();
                }
            }
            prop_assert_eq!(l.listpack, model_bytes(&model));
            prop_assert_eq!(l.len(), model.len());
            if l.is_packed() {
                prop_assert!(l.listpack <= PACKED_BYTES + 2000);
            }
            if op >= 2 && !l.is_packed() {
                prop_assert!(l.listpack > PACKED_BYTES / 2);
            }
            prop_assert_eq!(l.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), Vec::from(model.clone()));
        }
    }
}
