//! One request parse with fresh buffers, checked against the parser's contract, for the property
//! tests (`prop.rs`) and the fuzz target (`fuzz.rs`): every argument range lies inside the buffer
//! it names, a complete parse consumed something and no more than it was given, an incomplete
//! one left no arguments and asks for more bytes than it has.

use resp::request::{parse_request, ArgSource, Limits, Parsed};
use resp::ProtocolError;

/// The outcome, with the arguments copied out.
pub type Outcome = Result<(Parsed, ArgSource, Vec<Vec<u8>>), ProtocolError>;

pub fn parse_checked(buf: &[u8], limits: &Limits) -> Outcome {
    let mut args = Vec::new();
    let mut scratch = Vec::new();
    let (parsed, source) = parse_request(buf, limits, &mut args, &mut scratch)?;
    let base: &[u8] = match source {
        ArgSource::Buffer => buf,
        ArgSource::Scratch => &scratch,
    };
    let owned: Vec<Vec<u8>> = args
        .iter()
        .map(|r| match base.get(r.clone()) {
            Some(arg) => arg.to_vec(),
            None => panic!("range {r:?} outside a {}-byte {source:?}", base.len()),
        })
        .collect();
    match parsed {
        Parsed::Complete(n) => assert!(n > 0 && n <= buf.len(), "consumed {n} of {}", buf.len()),
        Parsed::Incomplete { need } => {
            assert!(owned.is_empty(), "arguments left by an incomplete parse");
            if let Some(need) = need {
                assert!(
                    need > buf.len(),
                    "need {need} of a {}-byte buffer",
                    buf.len()
                );
            }
        }
    }
    Ok((parsed, source, owned))
}
