//! Shorthands shared by the integration tests.
#![allow(dead_code)]

use memcache::{parse, Error, Parsed, Request};

pub const MAX: usize = 1024;

/// Parses `input`, expecting a complete request; returns it with the bytes consumed.
pub fn ok(input: &[u8]) -> (Request<'_>, usize) {
    match parse(input, MAX) {
        Ok(Parsed::Complete(req, n)) => (req, n),
        other => panic!(
            "{:?}: expected a request, got {other:?}",
            input.escape_ascii().to_string()
        ),
    }
}

/// Parses `input`, expecting a complete request that takes the whole input.
pub fn whole(input: &[u8]) -> Request<'_> {
    let (req, n) = ok(input);
    assert_eq!(n, input.len(), "consumed");
    req
}

pub fn err(input: &[u8]) -> Error {
    match parse(input, MAX) {
        Err(e) => e,
        other => panic!(
            "{:?}: expected an error, got {other:?}",
            input.escape_ascii().to_string()
        ),
    }
}

pub fn need(input: &[u8]) -> Option<usize> {
    match parse(input, MAX) {
        Ok(Parsed::Incomplete { need }) => need,
        other => panic!(
            "{:?}: expected Incomplete, got {other:?}",
            input.escape_ascii().to_string()
        ),
    }
}

/// A `CLIENT_ERROR` consuming `consumed` bytes with the given noreply.
pub fn client(msg: &'static str, consumed: usize, noreply: bool) -> Error {
    Error::Client {
        msg,
        consumed,
        noreply,
        close: false,
    }
}

pub fn unknown(consumed: usize) -> Error {
    Error::UnknownCommand { consumed }
}

pub fn keys(req: &Request<'_>) -> Vec<Vec<u8>> {
    match req {
        Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => {
            keys.clone().map(<[u8]>::to_vec).collect()
        }
        other => panic!("not a retrieval: {other:?}"),
    }
}
