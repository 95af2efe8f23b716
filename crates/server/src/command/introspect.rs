//! COMMAND and its subcommands (COUNT, LIST, INFO, DOCS, GETKEYS, GETKEYSANDFLAGS, HELP): the
//! command table and the metadata of `spec`, in the shapes Redis 7 replies with.

use store::glob;

use super::spec::{self, Begin, Find, KeySpec, Spec, Sub};
use super::{flags, lookup, Command, Ctx, COMMANDS, SYNTAX};

/// COMMAND's subcommands with their Redis arity (N: exactly, -N: at least, the name included).
const SUBCOMMANDS: &[(&str, i32)] = &[
    ("count", 2),
    ("list", -2),
    ("info", -2),
    ("docs", -2),
    ("getkeys", -4),
    ("getkeysandflags", -4),
    ("help", 2),
];

pub fn command(ctx: &mut Ctx<'_, '_>) {
    if ctx.argc() == 1 {
        ctx.array(COMMANDS.len());
        for c in COMMANDS {
            info_entry(ctx, c);
        }
        return;
    }
    let sub = super::lower(ctx.arg(1));
    let Some(&(_, arity)) = SUBCOMMANDS.iter().find(|(name, _)| *name == sub) else {
        let sub = String::from_utf8_lossy(ctx.arg(1)).into_owned();
        return ctx.err(format!("ERR unknown subcommand '{sub}'. Try COMMAND HELP.").as_bytes());
    };
    let argc = ctx.argc() as i32;
    if (arity >= 0 && argc != arity) || argc < -arity {
        return ctx
            .err(format!("ERR wrong number of arguments for 'command|{sub}' command").as_bytes());
    }
    match sub.as_str() {
        "count" => ctx.int(COMMANDS.len() as i64),
        "list" => list(ctx),
        "info" => info(ctx),
        "docs" => docs(ctx),
        "getkeys" => getkeys(ctx, false),
        "getkeysandflags" => getkeys(ctx, true),
        _ => help(ctx),
    }
}

/// A name COMMAND INFO / DOCS accept: a command, or `container|sub`.
enum Named {
    Command(&'static Command),
    Sub(&'static Sub),
}

fn find_named(name: &[u8]) -> Option<Named> {
    match name.iter().position(|&b| b == b'|') {
        None => lookup(name).map(Named::Command),
        Some(bar) => {
            let container = lookup(&name[..bar])?;
            spec::spec(container.name)?
                .subcommand(&name[bar + 1..])
                .map(Named::Sub)
        }
    }
}

/// The metadata of a table command. Every command has an entry (a test checks it); one
/// missing would be described from the table alone.
fn spec_of(c: &Command) -> Option<&'static Spec> {
    spec::spec(c.name)
}

// ---- COMMAND INFO ----------------------------------------------------------------------------

fn info(ctx: &mut Ctx<'_, '_>) {
    if ctx.argc() == 2 {
        ctx.array(COMMANDS.len());
        for c in COMMANDS {
            info_entry(ctx, c);
        }
        return;
    }
    let args = ctx.args;
    ctx.array(args.len() - 2);
    for name in args.tail(2) {
        match find_named(name) {
            Some(Named::Command(c)) => info_entry(ctx, c),
            Some(Named::Sub(s)) => sub_info_entry(ctx, s),
            None => ctx.nil(),
        }
    }
}

/// Redis's flag names that the command table's own flags imply, for a command without
/// metadata.
fn table_flags(c: &Command) -> Vec<&'static str> {
    [
        (flags::WRITE, "write"),
        (flags::READONLY, "readonly"),
        (flags::ADMIN, "admin"),
        (flags::FAST, "fast"),
        (flags::NOAUTH, "no_auth"),
        (flags::NOMULTI, "no_multi"),
    ]
    .iter()
    .filter(|(f, _)| c.has(*f))
    .map(|&(_, n)| n)
    .collect()
}

/// One command's 10-field entry: name, arity, flags, first key, last key, step, ACL
/// categories, tips, key specs, subcommands.
fn info_entry(ctx: &mut Ctx<'_, '_>, c: &Command) {
    let spec = spec_of(c);
    ctx.array(10);
    ctx.bulk(c.name.as_bytes());
    ctx.int(c.arity as i64);
    let mut names: Vec<&str> = match spec {
        Some(s) => s.flags.to_vec(),
        None => table_flags(c),
    };
    if spec.is_some_and(|s| s.key_specs.iter().any(movable)) {
        names.push("movablekeys");
    }
    simple_set(ctx, &names);
    ctx.int(c.first_key as i64);
    ctx.int(c.last_key as i64);
    ctx.int(c.step as i64);
    simple_set(ctx, spec.map_or(&[], |s| s.acl));
    bulk_set(ctx, spec.map_or(&[], |s| s.tips));
    let key_specs = spec.map_or(&[][..], |s| s.key_specs);
    ctx.set(key_specs.len());
    for ks in key_specs {
        key_spec(ctx, ks);
    }
    let subs = spec.map_or(&[][..], |s| s.subcommands);
    ctx.set(subs.len());
    for s in subs {
        sub_info_entry(ctx, s);
    }
}

fn sub_info_entry(ctx: &mut Ctx<'_, '_>, s: &Sub) {
    ctx.array(10);
    ctx.bulk(s.name.as_bytes());
    ctx.int(s.arity as i64);
    simple_set(ctx, s.flags);
    // A subcommand's keys (OBJECT ENCODING key): one key at a fixed index.
    let key_specs = spec::sub_key_specs(s.name);
    let index = key_specs.first().map_or(0, |ks| match ks.begin {
        Begin::Index(i) => i as i64,
        Begin::Keyword { .. } => 0,
    });
    ctx.int(index);
    ctx.int(index);
    ctx.int(i64::from(index != 0));
    simple_set(ctx, s.acl);
    bulk_set(ctx, s.tips);
    ctx.set(key_specs.len());
    for ks in key_specs {
        key_spec(ctx, ks);
    }
    ctx.set(0);
}

/// Whether a key spec finds keys by scanning the arguments (Redis's `movablekeys`).
fn movable(ks: &KeySpec) -> bool {
    matches!(ks.begin, Begin::Keyword { .. }) || matches!(ks.find, Find::Keynum { .. })
}

fn key_spec(ctx: &mut Ctx<'_, '_>, ks: &KeySpec) {
    let notes = !ks.notes.is_empty();
    ctx.map(3 + notes as usize);
    if notes {
        ctx.bulk(b"notes");
        ctx.bulk(ks.notes.as_bytes());
    }
    ctx.bulk(b"flags");
    simple_set(ctx, ks.flags);
    ctx.bulk(b"begin_search");
    match ks.begin {
        Begin::Index(i) => typed(ctx, "index", &[("index", Value::Int(i))]),
        Begin::Keyword { keyword, startfrom } => typed(
            ctx,
            "keyword",
            &[
                ("keyword", Value::Str(keyword)),
                ("startfrom", Value::Int(startfrom)),
            ],
        ),
    }
    ctx.bulk(b"find_keys");
    match ks.find {
        Find::Range {
            lastkey,
            keystep,
            limit,
        } => typed(
            ctx,
            "range",
            &[
                ("lastkey", Value::Int(lastkey)),
                ("keystep", Value::Int(keystep)),
                ("limit", Value::Int(limit)),
            ],
        ),
        Find::Keynum {
            keynumidx,
            firstkey,
            keystep,
        } => typed(
            ctx,
            "keynum",
            &[
                ("keynumidx", Value::Int(keynumidx)),
                ("firstkey", Value::Int(firstkey)),
                ("keystep", Value::Int(keystep)),
            ],
        ),
    }
}

enum Value {
    Int(i32),
    Str(&'static str),
}

/// `{type: <kind>, spec: {field: value, ...}}`.
fn typed(ctx: &mut Ctx<'_, '_>, kind: &str, fields: &[(&str, Value)]) {
    ctx.map(2);
    ctx.bulk(b"type");
    ctx.bulk(kind.as_bytes());
    ctx.bulk(b"spec");
    ctx.map(fields.len());
    for (name, value) in fields {
        ctx.bulk(name.as_bytes());
        match value {
            Value::Int(i) => ctx.int(*i as i64),
            Value::Str(s) => ctx.bulk(s.as_bytes()),
        }
    }
}

fn simple_set(ctx: &mut Ctx<'_, '_>, items: &[&str]) {
    ctx.set(items.len());
    for i in items {
        ctx.simple(i.as_bytes());
    }
}

fn bulk_set(ctx: &mut Ctx<'_, '_>, items: &[&str]) {
    ctx.set(items.len());
    for i in items {
        ctx.bulk(i.as_bytes());
    }
}

// ---- COMMAND LIST ----------------------------------------------------------------------------

/// Every command and subcommand name, as COMMAND LIST shows them.
fn all_names() -> impl Iterator<Item = (&'static str, &'static [&'static str])> {
    COMMANDS.iter().flat_map(|c| {
        let spec = spec_of(c);
        let subs = spec.map_or(&[][..], |s| s.subcommands);
        std::iter::once((c.name, spec.map_or(&[][..], |s| s.acl)))
            .chain(subs.iter().map(|s| (s.name, s.acl)))
    })
}

fn list(ctx: &mut Ctx<'_, '_>) {
    let names: Vec<&str> = match ctx.argc() {
        2 => all_names().map(|(n, _)| n).collect(),
        5 if ctx.arg(2).eq_ignore_ascii_case(b"filterby") => {
            let value = ctx.arg(4).to_ascii_lowercase();
            match super::lower(ctx.arg(3)).as_str() {
                // cairn has no modules.
                "module" => Vec::new(),
                "aclcat" => all_names()
                    .filter(|(_, acl)| acl.iter().any(|a| a.as_bytes()[1..] == value[..]))
                    .map(|(n, _)| n)
                    .collect(),
                "pattern" => all_names()
                    .filter(|(n, _)| glob::matches(&value, n.as_bytes()))
                    .map(|(n, _)| n)
                    .collect(),
                _ => return ctx.err(SYNTAX),
            }
        }
        _ => return ctx.err(SYNTAX),
    };
    ctx.array(names.len());
    for n in names {
        ctx.bulk(n.as_bytes());
    }
}

// ---- COMMAND DOCS ----------------------------------------------------------------------------

fn docs(ctx: &mut Ctx<'_, '_>) {
    let found: Vec<Named> = if ctx.argc() == 2 {
        COMMANDS.iter().map(Named::Command).collect()
    } else {
        ctx.args.tail(2).filter_map(find_named).collect()
    };
    ctx.map(found.len());
    for named in found {
        match named {
            Named::Command(c) => {
                ctx.bulk(c.name.as_bytes());
                command_docs(ctx, c);
            }
            Named::Sub(s) => {
                ctx.bulk(s.name.as_bytes());
                let container = &s.name[..s.name.find('|').unwrap_or(0)];
                sub_docs(ctx, s, spec::spec(container).map_or("", |c| c.group));
            }
        }
    }
}

/// summary, since, group, complexity, then what applies of doc_flags, deprecated_since,
/// replaced_by, history and subcommands (cairn does not describe the arguments).
fn command_docs(ctx: &mut Ctx<'_, '_>, c: &Command) {
    let Some(s) = spec_of(c) else {
        ctx.map(1);
        ctx.bulk(b"summary");
        return ctx.bulk(c.summary.as_bytes());
    };
    let optional = [
        !s.doc_flags.is_empty(),
        !s.deprecated_since.is_empty(),
        !s.replaced_by.is_empty(),
        !s.history.is_empty(),
        !s.subcommands.is_empty(),
    ];
    // Redis leaves out a complexity it has none for (MONITOR).
    let complexity = !s.complexity.is_empty();
    ctx.map(3 + usize::from(complexity) + optional.iter().filter(|&&o| o).count());
    for (field, value) in [
        ("summary", c.summary),
        ("since", s.since),
        ("group", s.group),
        ("complexity", s.complexity),
    ] {
        if !value.is_empty() || field != "complexity" {
            ctx.bulk(field.as_bytes());
            ctx.bulk(value.as_bytes());
        }
    }
    if !s.doc_flags.is_empty() {
        ctx.bulk(b"doc_flags");
        simple_set(ctx, s.doc_flags);
    }
    for (field, value) in [
        ("deprecated_since", s.deprecated_since),
        ("replaced_by", s.replaced_by),
    ] {
        if !value.is_empty() {
            ctx.bulk(field.as_bytes());
            ctx.bulk(value.as_bytes());
        }
    }
    if !s.history.is_empty() {
        ctx.bulk(b"history");
        ctx.set(s.history.len());
        for (version, change) in s.history {
            ctx.array(2);
            ctx.bulk(version.as_bytes());
            ctx.bulk(change.as_bytes());
        }
    }
    if !s.subcommands.is_empty() {
        ctx.bulk(b"subcommands");
        ctx.map(s.subcommands.len());
        for sub in s.subcommands {
            ctx.bulk(sub.name.as_bytes());
            sub_docs(ctx, sub, s.group);
        }
    }
}

fn sub_docs(ctx: &mut Ctx<'_, '_>, s: &Sub, group: &str) {
    ctx.map(4);
    for (field, value) in [
        ("summary", s.summary),
        ("since", s.since),
        ("group", group),
        ("complexity", s.complexity),
    ] {
        ctx.bulk(field.as_bytes());
        ctx.bulk(value.as_bytes());
    }
}

// ---- COMMAND GETKEYS / GETKEYSANDFLAGS -------------------------------------------------------

fn getkeys(ctx: &mut Ctx<'_, '_>, with_flags: bool) {
    let target: Vec<&[u8]> = ctx.args.tail(2).collect();
    let Some(c) = lookup(target[0]) else {
        return ctx.err(b"ERR Invalid command specified");
    };
    let spec = spec_of(c);
    // A container's subcommand must exist; a few have keys (OBJECT ENCODING key...).
    if spec.is_some_and(|s| !s.subcommands.is_empty()) {
        let Some(sub) = target.get(1).and_then(|sub| spec?.subcommand(sub)) else {
            return ctx.err(b"ERR Invalid command specified");
        };
        let key_specs = spec::sub_key_specs(sub.name);
        if key_specs.is_empty() {
            return ctx.err(b"ERR The command has no key arguments");
        }
        let argc = target.len() as i32;
        let arity_ok = if sub.arity >= 0 {
            argc == sub.arity
        } else {
            argc >= -sub.arity
        };
        if !arity_ok {
            return ctx.err(b"ERR Invalid number of arguments specified for command");
        }
        let keys = spec::find_keys_in(sub.name, key_specs, &target).unwrap_or_default();
        ctx.array(keys.len());
        for key in keys {
            if with_flags {
                ctx.array(2);
                ctx.bulk(target[key.pos]);
                simple_set(ctx, key.flags);
            } else {
                ctx.bulk(target[key.pos]);
            }
        }
        return;
    }
    let Some(spec) = spec.filter(|s| !s.key_specs.is_empty()) else {
        return ctx.err(b"ERR The command has no key arguments");
    };
    if !c.arity_ok(target.len()) {
        return ctx.err(b"ERR Invalid number of arguments specified for command");
    }
    let keys = match spec::find_keys(spec, &target) {
        Some(keys) if !keys.is_empty() => keys,
        _ if spec.flags.contains(&"no_mandatory_keys") => Vec::new(),
        _ => return ctx.err(b"ERR Invalid arguments specified for command"),
    };
    ctx.array(keys.len());
    for key in keys {
        if with_flags {
            ctx.array(2);
            ctx.bulk(target[key.pos]);
            simple_set(ctx, key.flags);
        } else {
            ctx.bulk(target[key.pos]);
        }
    }
}

fn help(ctx: &mut Ctx<'_, '_>) {
    const LINES: &[&str] = &[
        "(no subcommand)",
        "    Return details about all commands.",
        "COUNT",
        "    Return the total number of commands in this server.",
        "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
        "    Return a list of all commands in this server, or those matching the filter.",
        "INFO [<command-name> ...]",
        "    Return details about the given commands, or about all commands.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about the given commands, or about all commands.",
        "GETKEYS <full-command>",
        "    Return the keys from a full command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full command.",
    ];
    ctx.help("COMMAND", LINES);
}
