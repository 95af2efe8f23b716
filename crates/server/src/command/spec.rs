//! What COMMAND INFO and COMMAND DOCS say about a command beyond the command table: Redis's
//! flags, ACL categories, tips, key specs, docs and subcommands (`spec_table` holds them), and
//! how key specs find the keys of a request (COMMAND GETKEYS, GETKEYSANDFLAGS).
//!
//! The command table's `first_key/last_key/step` are what the server itself uses (locking,
//! tracking); the key specs describe the same keys in Redis 7's richer form, and a test checks
//! that both always agree.

use std::collections::HashMap;
use std::sync::OnceLock;

pub use super::spec_table::SPECS;

/// One command's metadata, as Redis 7 describes the same command.
pub struct Spec {
    pub name: &'static str,
    /// Redis's command flags (`write`, `denyoom`, `fast`, ...).
    pub flags: &'static [&'static str],
    /// ACL categories, with their `@`.
    pub acl: &'static [&'static str],
    /// Hints for cluster clients (`request_policy:...`, `nondeterministic_output`, ...).
    pub tips: &'static [&'static str],
    pub key_specs: &'static [KeySpec],
    pub group: &'static str,
    pub since: &'static str,
    pub complexity: &'static str,
    /// `deprecated`, `syscmd`.
    pub doc_flags: &'static [&'static str],
    pub deprecated_since: &'static str,
    pub replaced_by: &'static str,
    pub history: &'static [(&'static str, &'static str)],
    /// The subcommands cairn implements (`config|get`...), none of which has keys.
    pub subcommands: &'static [Sub],
}

/// A subcommand of a container command (CONFIG, CLIENT, COMMAND, PUBSUB).
pub struct Sub {
    /// The full name, `container|sub`.
    pub name: &'static str,
    pub arity: i32,
    pub flags: &'static [&'static str],
    pub acl: &'static [&'static str],
    pub tips: &'static [&'static str],
    pub summary: &'static str,
    pub since: &'static str,
    pub complexity: &'static str,
}

/// Where some of a command's keys are and what the command does with them.
pub struct KeySpec {
    pub notes: &'static str,
    /// `RO`/`RW`/`OW`/`RM` and `access`/`update`/`insert`/`delete`, ...
    pub flags: &'static [&'static str],
    pub begin: Begin,
    pub find: Find,
}

/// Where the search for the keys starts. (No command of the table has its keys after a keyword
/// or a count yet; the unit tests below exercise those forms.)
#[cfg_attr(not(test), allow(dead_code))]
pub enum Begin {
    /// At this argument.
    Index(i32),
    /// After this keyword, searched from `startfrom` (negative: from the end, backwards).
    Keyword {
        keyword: &'static str,
        startfrom: i32,
    },
}

/// Which arguments, from the start found, are keys.
#[cfg_attr(not(test), allow(dead_code))]
pub enum Find {
    /// Up to `lastkey` past the start (negative: from the end; with `limit` > 1, up to
    /// 1/limit of the remaining arguments), every `keystep`.
    Range {
        lastkey: i32,
        keystep: i32,
        limit: i32,
    },
    /// The argument `keynumidx` past the start says how many keys follow from `firstkey`.
    Keynum {
        keynumidx: i32,
        firstkey: i32,
        keystep: i32,
    },
}

/// A key found in a request: its position and its key spec's flags.
#[derive(Debug, PartialEq)]
pub struct KeyRef {
    pub pos: usize,
    pub flags: &'static [&'static str],
}

/// The metadata of a command of the table, by its (lowercase) name.
pub fn spec(name: &str) -> Option<&'static Spec> {
    static INDEX: OnceLock<HashMap<&'static str, &'static Spec>> = OnceLock::new();
    INDEX
        .get_or_init(|| SPECS.iter().map(|s| (s.name, s)).collect())
        .get(name)
        .copied()
}

impl Spec {
    pub fn subcommand(&self, sub: &[u8]) -> Option<&'static Sub> {
        let sub = std::str::from_utf8(sub).ok()?.to_ascii_lowercase();
        let prefix_len = self.name.len() + 1;
        self.subcommands
            .iter()
            .find(|s| s.name[prefix_len..] == sub)
    }
}

/// The keys of a request (`args[0]` is the command name), as Redis's
/// `getKeysUsingKeySpecs` finds them; `None` when a spec cannot be applied (a missing keyword
/// is not an error: that spec has no keys then), which Redis reports as invalid arguments.
pub fn find_keys(spec: &Spec, args: &[&[u8]]) -> Option<Vec<KeyRef>> {
    find_keys_in(spec.name, spec.key_specs, args)
}

/// The key specs of a subcommand that has keys (OBJECT ENCODING key...), from
/// `spec_table::SUB_KEY_SPECS`.
pub fn sub_key_specs(sub: &str) -> &'static [KeySpec] {
    super::spec_table::SUB_KEY_SPECS
        .iter()
        .find(|(name, _)| *name == sub)
        .map_or(&[], |(_, specs)| *specs)
}

/// As `find_keys`, with the key specs given.
pub fn find_keys_in(name: &str, key_specs: &[KeySpec], args: &[&[u8]]) -> Option<Vec<KeyRef>> {
    let argc = args.len() as i64;
    let mut keys = Vec::new();
    for ks in key_specs {
        let first = match ks.begin {
            Begin::Index(i) => i as i64,
            Begin::Keyword { keyword, startfrom } => {
                let found = if startfrom >= 0 {
                    (startfrom as i64..argc)
                        .find(|&i| args[i as usize].eq_ignore_ascii_case(keyword.as_bytes()))
                } else {
                    (1..=argc + startfrom as i64)
                        .rev()
                        .find(|&i| args[i as usize].eq_ignore_ascii_case(keyword.as_bytes()))
                };
                match found {
                    Some(i) => i + 1,
                    None => continue,
                }
            }
        };
        let (first, last, step) = match ks.find {
            Find::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let last = if lastkey >= 0 {
                    first + lastkey as i64
                } else if limit <= 1 {
                    argc + lastkey as i64
                } else {
                    first + ((argc - first) / limit as i64 + lastkey as i64)
                };
                (first, last, keystep as i64)
            }
            Find::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                let at = first + keynumidx as i64;
                let numkeys = args.get(at as usize).and_then(|a| super::parse_i64(a))?;
                if numkeys < 0 {
                    return None;
                }
                let first = first + firstkey as i64;
                let span = numkeys.saturating_mul(keystep as i64);
                (first, first.saturating_add(span) - 1, keystep as i64)
            }
        };
        // As Redis: first or last out of bounds is a syntax error.
        if last >= argc || last < first || first >= argc || step < 1 {
            return None;
        }
        let mut pos = first;
        while pos <= last {
            keys.push(KeyRef {
                pos: pos as usize,
                flags: variable_key_flags(name, args).unwrap_or(ks.flags),
            });
            pos += step;
        }
    }
    Some(keys)
}

/// The key flags of a command whose spec says `variable_flags`: they depend on its arguments.
fn variable_key_flags(name: &str, args: &[&[u8]]) -> Option<&'static [&'static str]> {
    match name {
        // SET overwrites, unless GET makes it read the old value too.
        "set" => Some(
            if args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get")) {
                &["RW", "access", "update"]
            } else {
                &["OW", "update"]
            },
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{flags, COMMANDS};

    fn request(name: &'static str, argc: usize) -> Vec<Vec<u8>> {
        std::iter::once(name.as_bytes().to_vec())
            .chain((1..argc).map(|i| format!("a{i}").into_bytes()))
            .collect()
    }

    #[test]
    fn every_command_has_metadata() {
        let missing: Vec<_> = COMMANDS
            .iter()
            .filter(|c| spec(c.name).is_none())
            .map(|c| c.name)
            .collect();
        assert!(missing.is_empty(), "no entry in spec_table for {missing:?}");
    }

    /// The key specs (COMMAND GETKEYS, INFO) and the table's key positions (locking, tracking)
    /// find the same keys, for every command and a range of argument counts.
    #[test]
    fn key_specs_agree_with_the_table() {
        // A script's keys follow its numkeys argument, which the table cannot express (and a
        // script locks nothing by key: `crate::scripts`).
        for c in COMMANDS.iter().filter(|c| !c.has(flags::SCRIPTING)) {
            let spec = spec(c.name).expect("metadata");
            if c.has(flags::MOVABLE) {
                // Keys found from the arguments: their specs have a key count or a keyword.
                assert!(
                    spec.key_specs
                        .iter()
                        .any(|ks| matches!(ks.find, Find::Keynum { .. })
                            || matches!(ks.begin, Begin::Keyword { .. })),
                    "{}",
                    c.name
                );
                continue;
            }
            let min = c.arity.unsigned_abs() as usize;
            let max = if c.arity < 0 { min + 5 } else { min };
            for argc in min..=max {
                let args = request(c.name, argc);
                let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                let table: Vec<usize> = c.key_positions(argc).collect();
                let found: Vec<usize> = find_keys(spec, &args)
                    .unwrap_or_default()
                    .iter()
                    .map(|k| k.pos)
                    .collect();
                assert_eq!(found, table, "{} with {argc} arguments", c.name);
            }
            assert_eq!(spec.key_specs.is_empty(), c.first_key == 0, "{}", c.name);
        }
    }

    /// The flags the server acts on and the flags COMMAND INFO shows say the same. (A
    /// container's own entry has no flags in Redis: its subcommands have them.)
    #[test]
    fn redis_flags_agree_with_the_table() {
        for c in COMMANDS {
            let spec = spec(c.name).expect("metadata");
            if !spec.subcommands.is_empty() {
                continue;
            }
            for (flag, name) in [
                (flags::WRITE, "write"),
                (flags::READONLY, "readonly"),
                (flags::FAST, "fast"),
                (flags::ADMIN, "admin"),
                (flags::NOAUTH, "no_auth"),
            ] {
                assert_eq!(
                    c.has(flag),
                    spec.flags.contains(&name),
                    "{}: {name}",
                    c.name
                );
            }
            // Commands that reply from another thread cannot be queued (see `Session`).
            if c.has(flags::DEFERRED) {
                assert!(spec.flags.contains(&"no_multi"), "{}", c.name);
            }
            // Redis's EVAL_RO is `readonly` without `@read` (its category is `@scripting`).
            let categories: &[_] = if c.has(flags::SCRIPTING) {
                &[(flags::WRITE, "@write")]
            } else {
                &[(flags::WRITE, "@write"), (flags::READONLY, "@read")]
            };
            for &(flag, category) in categories {
                assert_eq!(
                    c.has(flag),
                    spec.acl.contains(&category),
                    "{}: {category}",
                    c.name
                );
            }
            assert_ne!(
                spec.acl.contains(&"@fast"),
                spec.acl.contains(&"@slow"),
                "{}",
                c.name
            );
        }
    }

    fn positions(spec: &Spec, line: &str) -> Option<Vec<usize>> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        find_keys(spec, &args).map(|keys| keys.iter().map(|k| k.pos).collect())
    }

    fn with_keys(key_specs: &'static [KeySpec]) -> Spec {
        Spec {
            name: "test",
            flags: &[],
            acl: &[],
            tips: &[],
            key_specs,
            group: "",
            since: "",
            complexity: "",
            doc_flags: &[],
            deprecated_since: "",
            replaced_by: "",
            history: &[],
            subcommands: &[],
        }
    }

    /// Keys counted by an argument, as ZUNIONSTORE's or EVAL's.
    #[test]
    fn keynum_specs_read_the_count() {
        static SPECS: [KeySpec; 2] = [
            KeySpec {
                notes: "",
                flags: &["OW"],
                begin: Begin::Index(1),
                find: Find::Range {
                    lastkey: 0,
                    keystep: 1,
                    limit: 0,
                },
            },
            KeySpec {
                notes: "",
                flags: &["RO"],
                begin: Begin::Index(2),
                find: Find::Keynum {
                    keynumidx: 0,
                    firstkey: 1,
                    keystep: 1,
                },
            },
        ];
        let spec = with_keys(&SPECS);
        assert_eq!(
            positions(&spec, "zunionstore d 2 a b WEIGHTS 1 2"),
            Some(vec![1, 3, 4])
        );
        assert_eq!(positions(&spec, "zunionstore d 3 a b"), None);
        assert_eq!(positions(&spec, "zunionstore d x a b"), None);
        assert_eq!(positions(&spec, "zunionstore d -1 a b"), None);
        assert_eq!(
            positions(&spec, "zunionstore d 9223372036854775807 a b"),
            None
        );
    }

    /// Keys after a keyword, searched from the end, as MIGRATE's KEYS or XREAD's STREAMS.
    #[test]
    fn keyword_specs_search_for_the_keyword() {
        static SPECS: [KeySpec; 1] = [KeySpec {
            notes: "",
            flags: &["RO"],
            begin: Begin::Keyword {
                keyword: "STREAMS",
                startfrom: 1,
            },
            find: Find::Range {
                lastkey: -1,
                keystep: 1,
                limit: 2,
            },
        }];
        let spec = with_keys(&SPECS);
        assert_eq!(
            positions(&spec, "xread COUNT 2 streams a b 0 0"),
            Some(vec![4, 5])
        );
        assert_eq!(positions(&spec, "xread COUNT 2"), Some(vec![]));
        static BACKWARDS: [KeySpec; 1] = [KeySpec {
            notes: "",
            flags: &["RW"],
            begin: Begin::Keyword {
                keyword: "KEYS",
                startfrom: -2,
            },
            find: Find::Range {
                lastkey: -1,
                keystep: 1,
                limit: 0,
            },
        }];
        let spec = with_keys(&BACKWARDS);
        assert_eq!(
            positions(&spec, "migrate h p \"\" 0 5 KEYS k1 k2"),
            Some(vec![7, 8])
        );
    }

    #[test]
    fn set_key_flags_depend_on_get() {
        let set = spec("set").unwrap();
        let flags = |line: &str| {
            let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            find_keys(set, &args).unwrap()[0].flags
        };
        assert_eq!(flags("set k v"), ["OW", "update"]);
        assert_eq!(flags("set k v EX 10 get"), ["RW", "access", "update"]);
    }
}
