//! The server crate's layering: the graph of its top-level modules (`clients`, `command`,
//! `net`, ...) must have no cycle, and each names only modules of lower layers (`LAYERS`). An
//! edge A -> B exists when a file of module A names `crate::B` (in a `use`, a `use crate::{B,
//! ...}` group or a path in code) or reaches B through `super::`. Comments and string literals
//! are not code and do not count.
//! docs/architecture.md ("The server crate's layers") describes the intended order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The server's layers, lowest first: a module may name only modules of lower layers (so the
/// first layer's modules name none). docs/architecture.md says what each layer is. A module
/// that is in no layer yet is only checked for cycles.
const LAYERS: &[&[&str]] = &[
    &[
        "protocol",
        "config",
        "stats",
        "keyspace",
        "sql_changes",
        "health",
        "daemon",
    ],
    &["clients", "snapshot"],
    &["pubsub", "observe", "blocking", "scripts", "replication"],
    &["tracking", "busy"],
    &["wb_tap"],
    &["shared"],
    &["memory"],
    &["command"],
    &["replica_link"],
    &["memcached"],
    &["session"],
    &["net"],
    &["exporter"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Where a dependency was seen: file and line.
type Evidence = BTreeMap<(String, String), (PathBuf, usize)>;

/// Replaces comments, string and char literals by spaces (newlines kept, so lines still count).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let blank = |out: &mut Vec<u8>, s: &[u8]| {
        out.extend(s.iter().map(|&c| if c == b'\n' { b'\n' } else { b' ' }))
    };
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(b"/*") {
            // Block comments nest in Rust.
            let (mut depth, mut j) = (0usize, 0);
            while j < rest.len() {
                if rest[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &rest[..j]);
            i += j;
        } else if (rest.starts_with(b"r\"") || rest.starts_with(b"r#") || rest.starts_with(b"br"))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && raw_string_len(rest).is_some()
        {
            let n = raw_string_len(rest).unwrap();
            blank(&mut out, &rest[..n]);
            i += n;
        } else if rest[0] == b'"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            let n = (j + 1).min(rest.len());
            blank(&mut out, &rest[..n]);
            i += n;
        } else if rest[0] == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a), which stays.
            let n = if rest.len() > 2 && rest[1] == b'\\' {
                rest[2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map_or(1, |p| p + 3)
            } else if rest.len() > 2 && rest[2] == b'\'' {
                3
            } else {
                1
            };
            blank(&mut out, &rest[..n]);
            let at = out.len() - n;
            out[at] = b'\'';
            i += n;
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Length of the raw string literal at the start of `s` (`r"..."`, `r#"..."#`, `br"..."`).
fn raw_string_len(s: &[u8]) -> Option<usize> {
    let start = if s.starts_with(b"br") { 2 } else { 1 };
    let hashes = s[start..].iter().take_while(|&&c| c == b'#').count();
    let open = start + hashes;
    if s.get(open) != Some(&b'"') {
        return None;
    }
    let mut close = vec![b'"'];
    close.extend(std::iter::repeat_n(b'#', hashes));
    let body = &s[open + 1..];
    let end = body
        .windows(close.len())
        .position(|w| w == close.as_slice())?;
    Some(open + 1 + end + close.len())
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The identifier at the start of `s`.
fn ident(s: &[u8]) -> &str {
    let n = s.iter().take_while(|&&c| is_ident(c)).count();
    std::str::from_utf8(&s[..n]).unwrap()
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// First path segments named after the `{` at `s[open]` of a `use` group: `{a, b::c, d::{e}}`
/// gives a, b, d.
fn group_heads(s: &[u8], open: usize) -> Vec<String> {
    let (mut heads, mut depth, mut i, mut expect) = (Vec::new(), 0usize, open, true);
    while i < s.len() {
        match s[i] {
            b'{' => {
                depth += 1;
                expect = depth == 1;
            }
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            b',' if depth == 1 => expect = true,
            c if c.is_ascii_whitespace() => {}
            c if is_ident(c) && expect => {
                let name = ident(&s[i..]);
                heads.push(name.to_string());
                i += name.len();
                expect = false;
                continue;
            }
            _ => expect = false,
        }
        i += 1;
    }
    heads
}

/// The crate-root modules named by one file: (module, line). `path` is the file's module path
/// below the crate root (`["command", "strings"]` for src/command/strings.rs), which `super::`
/// resolves against, inline `mod name { ... }` blocks included.
fn references(code: &str, path: &[String]) -> Vec<(String, usize)> {
    let s = code.as_bytes();
    let mut found = Vec::new();
    // Inline modules open at (brace depth, name).
    let mut inline: Vec<(usize, String)> = Vec::new();
    let (mut depth, mut i) = (0usize, 0usize);
    let line_at = |i: usize| 1 + s[..i].iter().filter(|&&c| c == b'\n').count();
    while i < s.len() {
        let c = s[i];
        let word_start = i == 0 || !(is_ident(s[i - 1]) || s[i - 1] == b'$' || s[i - 1] == b':');
        match c {
            b'{' => depth += 1,
            b'}' => {
                if inline.last().is_some_and(|(d, _)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ if word_start
                && s[i..].starts_with(b"mod")
                && !is_ident(*s.get(i + 3).unwrap_or(&0)) =>
            {
                let j = skip_ws(s, i + 3);
                let name = ident(&s[j..]).to_string();
                let k = skip_ws(s, j + name.len());
                if !name.is_empty() && s.get(k) == Some(&b'{') {
                    inline.push((depth + 1, name));
                }
            }
            _ if word_start && s[i..].starts_with(b"crate::") => {
                let j = skip_ws(s, i + 7);
                if s.get(j) == Some(&b'{') {
                    for head in group_heads(s, j) {
                        found.push((head, line_at(i)));
                    }
                } else {
                    let name = ident(&s[j..]);
                    if !name.is_empty() {
                        found.push((name.to_string(), line_at(i)));
                    }
                }
                i = j;
                continue;
            }
            _ if word_start && s[i..].starts_with(b"super::") => {
                let mut here: Vec<String> = path.to_vec();
                here.extend(inline.iter().map(|(_, n)| n.clone()));
                let mut j = i;
                while s[j..].starts_with(b"super::") {
                    here.pop();
                    j = skip_ws(s, j + 7);
                }
                if here.is_empty() {
                    // Reached the crate root: the next segment (or group) is a top module.
                    if s.get(j) == Some(&b'{') {
                        for head in group_heads(s, j) {
                            found.push((head, line_at(i)));
                        }
                    } else {
                        found.push((ident(&s[j..]).to_string(), line_at(i)));
                    }
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// Every .rs file under `dir`.
fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// The module graph of the crate whose sources are in `src`: top-level module -> the
/// top-level modules it names, with where each edge was seen.
fn module_graph(src: &Path) -> (BTreeMap<String, BTreeSet<String>>, Evidence) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| top_module(src, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    let mut evidence = Evidence::new();
    for file in &files {
        let Some(from) = top_module(src, file) else {
            continue;
        };
        let path = module_path(src, file);
        let code = code_only(&std::fs::read_to_string(file).unwrap());
        for (to, line) in references(&code, &path) {
            if to != from && modules.contains(&to) {
                evidence
                    .entry((from.clone(), to.clone()))
                    .or_insert_with(|| (file.clone(), line));
                graph.get_mut(&from).unwrap().insert(to);
            }
        }
    }
    (graph, evidence)
}

/// The module path of `file` below the crate root (`src/command/mod.rs` is `["command"]`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    parts
}

/// The top-level module `file` belongs to; None for the crate roots (lib.rs, main.rs: main.rs
/// is the binary, which sees the library as `cairn_server::`).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    module_path(src, file).into_iter().next()
}

/// A cycle of `graph`, as the list of its modules (the first repeated at the end).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth-first search; a back edge to a module on the stack closes a cycle.
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| s == m) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        stack.push(m.to_string());
        for next in graph.get(m).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut done, &mut Vec::new()))
}

fn show_edge(evidence: &Evidence, from: &str, to: &str) -> String {
    match evidence.get(&(from.to_string(), to.to_string())) {
        Some((file, line)) => {
            let file = file
                .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                .unwrap_or(file);
            format!("  {from} -> {to}   ({}:{line})", file.display())
        }
        None => format!("  {from} -> {to}"),
    }
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_module_graph_has_no_cycle() {
    let (graph, evidence) = module_graph(&src_dir());
    assert!(graph.contains_key("command") && graph.contains_key("clients"));
    let report: Vec<String> = cyclic_groups(&graph)
        .iter()
        .map(|group| {
            let cycle = find_cycle(&subgraph(&graph, group)).unwrap();
            let edges: Vec<String> = cycle
                .windows(2)
                .map(|w| show_edge(&evidence, &w[0], &w[1]))
                .collect();
            let all: Vec<String> = subgraph(&graph, group)
                .iter()
                .flat_map(|(a, bs)| bs.iter().map(move |b| format!("{a}->{b}")))
                .collect();
            format!(
                "{} depend on each other, e.g. {}:\n{}\n  (every edge among them: {})",
                group.iter().cloned().collect::<Vec<_>>().join(", "),
                cycle.join(" -> "),
                edges.join("\n"),
                all.join(" ")
            )
        })
        .collect();
    assert!(
        report.is_empty(),
        "import cycles between the server's modules:\n{}",
        report.join("\n")
    );
}

/// The modules reachable from `m` by one edge or more.
fn reachable(graph: &BTreeMap<String, BTreeSet<String>>, m: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&String> = graph[m].iter().collect();
    while let Some(n) = todo.pop() {
        if seen.insert(n.clone()) {
            todo.extend(graph[n].iter());
        }
    }
    seen
}

/// The groups of modules that depend on each other (strongly connected, more than one).
fn cyclic_groups(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let reach: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reachable(graph, m))).collect();
    let mut groups: Vec<BTreeSet<String>> = Vec::new();
    for (m, from_m) in &reach {
        if from_m.contains(*m) && !groups.iter().any(|g| g.contains(*m)) {
            groups.push(
                from_m
                    .iter()
                    .filter(|n| reach[n].contains(*m))
                    .cloned()
                    .collect(),
            );
        }
    }
    groups
}

fn subgraph(
    graph: &BTreeMap<String, BTreeSet<String>>,
    keep: &BTreeSet<String>,
) -> BTreeMap<String, BTreeSet<String>> {
    keep.iter()
        .map(|m| (m.clone(), graph[m].intersection(keep).cloned().collect()))
        .collect()
}

#[test]
fn each_module_names_only_lower_layers() {
    let (graph, evidence) = module_graph(&src_dir());
    let mut broken = Vec::new();
    for module in LAYERS.iter().copied().flatten() {
        let Some(deps) = graph.get(*module) else {
            broken.push(format!("  module `{module}` of LAYERS does not exist"));
            continue;
        };
        let layer = layer_of(module).unwrap();
        for dep in deps {
            if layer_of(dep).is_some_and(|l| l >= layer) {
                broken.push(show_edge(&evidence, module, dep));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "a module names a module of its own or a higher layer (see LAYERS):\n{}",
        broken.join("\n")
    );
}

// The checker itself: each of these would pass vacuously if the parser missed a form.

#[test]
fn paths_groups_and_super_are_found() {
    let code = code_only(
        "use crate::clients::ClientInfo;\n\
         use crate::{net, session::Protocol, shared::{Shared, Settings}};\n\
         fn f() { crate::memcached::run(); let s = \"crate::fake\"; } // crate::comment\n\
         /* crate::block /* nested */ crate::still */\n\
         mod tests { use super::super::pubsub; use super::*; }\n\
         pub(crate) fn g<'a>(c: char) -> bool { c == '\"' || c == '{' }\n\
         use crate::config;\n",
    );
    let names: Vec<String> = references(&code, &["command".into(), "x".into()])
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    assert_eq!(
        names,
        ["clients", "net", "session", "shared", "memcached", "config"],
        "super::super:: from command::x::tests stays in command"
    );
    // From a top-level file's inline module, super::super reaches the root.
    let found = references(
        &code_only("mod tests { use super::super::pubsub; }"),
        &["clients".into()],
    );
    assert_eq!(found, [("pubsub".to_string(), 1)]);
    // A raw string is not code.
    assert!(references(&code_only("let s = r#\"crate::net\"#;"), &["x".into()]).is_empty());
}

#[test]
fn a_cycle_is_found_and_a_dag_passes() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    let dag = graph(&[
        ("net", "session"),
        ("session", "clients"),
        ("net", "clients"),
    ]);
    assert_eq!(find_cycle(&dag), None);
    assert!(cyclic_groups(&dag).is_empty());
    let cyclic = graph(&[
        ("net", "session"),
        ("session", "clients"),
        ("clients", "net"),
    ]);
    assert_eq!(
        find_cycle(&cyclic).unwrap(),
        ["clients", "net", "session", "clients"]
    );
    // Two separate cycles are both reported; a module merely above one is in none.
    let two = graph(&[
        ("clients", "net"),
        ("net", "clients"),
        ("shared", "metrics"),
        ("metrics", "shared"),
        ("command", "shared"),
    ]);
    let groups: Vec<Vec<String>> = cyclic_groups(&two)
        .into_iter()
        .map(|g| g.into_iter().collect())
        .collect();
    assert_eq!(groups, [vec!["clients", "net"], vec!["metrics", "shared"]]);
}
