//! Property: any value bound as a parameter is stored and read back unchanged.

mod common;
use common::*;
use proptest::prelude::*;
use sql::{SqlEngine, Value};
use std::sync::{Arc, OnceLock};

fn shared_engine() -> &'static Arc<SqlEngine> {
    static E: OnceLock<Arc<SqlEngine>> = OnceLock::new();
    E.get_or_init(|| {
        let e = engine();
        exec(&e, "CREATE TABLE r(id INTEGER PRIMARY KEY, x)", vec![]);
        e
    })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::Integer),
        any::<f64>()
            .prop_filter("NaN reads back as NULL", |f| !f.is_nan())
            .prop_map(Value::Real),
        any::<String>().prop_map(|s| Value::Text(s.into_bytes())),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Value::Blob),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Value::from_bulk),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn values_round_trip(v in value()) {
        let e = shared_engine();
        let Value::Integer(id) = rows(e, "INSERT INTO r(x) VALUES (?) RETURNING id", vec![v.clone()])[0][0] else {
            panic!("no id")
        };
        let got = rows(e, "SELECT x FROM r WHERE id = ?", vec![Value::Integer(id)]);
        prop_assert_eq!(&got[0][0], &v);
        // And as a bare expression, without a column in between.
        prop_assert_eq!(&rows(e, "SELECT ?", vec![v.clone()])[0][0], &v);
    }
}
