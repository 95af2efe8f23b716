//! COMMAND: subcommand errors, LIST filters, GETKEYS / GETKEYSANDFLAGS and INFO entries as
//! Redis 7 replies, and GETKEYS for every command of the table.

use crate::command::COMMANDS;
use crate::testkit::*;

#[test]
fn command_subcommand_errors() {
    check_both(&[
        ("COMMAND BOGUS", "-ERR unknown subcommand 'BOGUS'. Try COMMAND HELP."),
        ("COMMAND COUNT x", "-ERR wrong number of arguments for 'command|count' command"),
        ("COMMAND HELP x", "-ERR wrong number of arguments for 'command|help' command"),
        ("COMMAND LIST FILTERBY", "-ERR syntax error"),
        ("COMMAND LIST FILTERBY PATTERN", "-ERR syntax error"),
        ("COMMAND LIST FILTERBY BOGUS x", "-ERR syntax error"),
        ("COMMAND LIST BOGUS", "-ERR syntax error"),
        ("COMMAND LIST FILTERBY PATTERN a b", "-ERR syntax error"),
        ("COMMAND GETKEYS", "-ERR wrong number of arguments for 'command|getkeys' command"),
        ("COMMAND GETKEYS get", "-ERR wrong number of arguments for 'command|getkeys' command"),
        ("COMMAND GETKEYSANDFLAGS get", "-ERR wrong number of arguments for 'command|getkeysandflags' command"),
        ("COMMAND GETKEYS nosuch a", "-ERR Invalid command specified"),
        ("COMMAND GETKEYSANDFLAGS nosuch a", "-ERR Invalid command specified"),
        ("COMMAND GETKEYS ping x", "-ERR The command has no key arguments"),
        ("COMMAND GETKEYSANDFLAGS ping x", "-ERR The command has no key arguments"),
        ("COMMAND GETKEYS config get x", "-ERR The command has no key arguments"),
        ("COMMAND GETKEYS config bogus", "-ERR Invalid command specified"),
        ("COMMAND GETKEYS client list", "-ERR The command has no key arguments"),
        ("COMMAND GETKEYS get a b", "-ERR Invalid number of arguments specified for command"),
        ("COMMAND GETKEYS set a", "-ERR Invalid number of arguments specified for command"),
        ("COMMAND GETKEYS mset a", "-ERR Invalid number of arguments specified for command"),
        ("COMMAND GETKEYS hset h f", "-ERR Invalid number of arguments specified for command"),
        ("COMMAND GETKEYS publish ch msg", "-ERR The command has no key arguments"),
        ("COMMAND GETKEYS subscribe ch", "-ERR The command has no key arguments"),
        ("COMMAND GETKEYS keys *", "-ERR The command has no key arguments"),
        ("COMMAND GETKEYS scan 0", "-ERR The command has no key arguments"),
    ]);
}

#[test]
fn command_list_filters() {
    check_both(&[
        ("COMMAND LIST FILTERBY MODULE nosuchmodule", "[]"),
        ("COMMAND LIST FILTERBY ACLCAT nosuchcat", "[]"),
        // In table order (Redis lists its commands in its hash table's order).
        ("COMMAND LIST FILTERBY aclcat transaction", r#"["multi", "exec", "discard", "watch", "unwatch"]"#),
        ("COMMAND LIST FILTERBY PATTERN nosuch*", "[]"),
        ("COMMAND LIST FILTERBY PATTERN getse?", r#"["getset"]"#),
        ("COMMAND LIST FILTERBY PATTERN GETSET", r#"["getset"]"#),
        ("COMMAND LIST FILTERBY pattern config|get", r#"["config|get"]"#),
        ("COMMAND LIST FILTERBY pattern client|trackinginf[aeiou]", r#"["client|trackinginfo"]"#),
        ("COMMAND LIST FILTERBY PATTERN *|numpat", r#"["pubsub|numpat"]"#),
    ]);
}

#[test]
fn command_getkeys() {
    check_both(&[
        ("COMMAND GETKEYS set a b", r#"["a"]"#),
        ("COMMAND GETKEYS SET a b EX 10 GET", r#"["a"]"#),
        ("COMMAND GETKEYS get a", r#"["a"]"#),
        ("COMMAND GETKEYS mset a 1 b 2", r#"["a", "b"]"#),
        ("COMMAND GETKEYS mset a 1 b", r#"["a", "b"]"#),
        ("COMMAND GETKEYS msetnx a 1 b 2 c 3", r#"["a", "b", "c"]"#),
        ("COMMAND GETKEYS mget a b c", r#"["a", "b", "c"]"#),
        ("COMMAND GETKEYS del a b c", r#"["a", "b", "c"]"#),
        ("COMMAND GETKEYS exists a a", r#"["a", "a"]"#),
        ("COMMAND GETKEYS watch a b", r#"["a", "b"]"#),
        ("COMMAND GETKEYS expire a 10 NX", r#"["a"]"#),
        ("COMMAND GETKEYS hset h f v f2 v2", r#"["h"]"#),
        ("COMMAND GETKEYS getex k PERSIST", r#"["k"]"#),
    ]);
}

#[test]
fn command_getkeysandflags() {
    check_versions(&[
        ("COMMAND GETKEYSANDFLAGS set a b", r#"[["a", [+OW, +update]]]"#, r#"[["a", ~[+OW, +update]]]"#),
        ("COMMAND GETKEYSANDFLAGS set a b get", r#"[["a", [+RW, +access, +update]]]"#, r#"[["a", ~[+RW, +access, +update]]]"#),
        ("COMMAND GETKEYSANDFLAGS set a b nx px 10", r#"[["a", [+OW, +update]]]"#, r#"[["a", ~[+OW, +update]]]"#),
        ("COMMAND GETKEYSANDFLAGS del a b", r#"[["a", [+RM, +delete]], ["b", [+RM, +delete]]]"#, r#"[["a", ~[+RM, +delete]], ["b", ~[+RM, +delete]]]"#),
        ("COMMAND GETKEYSANDFLAGS getex a EX 1", r#"[["a", [+RW, +access, +update]]]"#, r#"[["a", ~[+RW, +access, +update]]]"#),
        ("COMMAND GETKEYSANDFLAGS mget a b", r#"[["a", [+RO, +access]], ["b", [+RO, +access]]]"#, r#"[["a", ~[+RO, +access]], ["b", ~[+RO, +access]]]"#),
        ("COMMAND GETKEYSANDFLAGS mset a 1 b 2", r#"[["a", [+OW, +update]], ["b", [+OW, +update]]]"#, r#"[["a", ~[+OW, +update]], ["b", ~[+OW, +update]]]"#),
        ("COMMAND GETKEYSANDFLAGS getdel a", r#"[["a", [+RW, +access, +delete]]]"#, r#"[["a", ~[+RW, +access, +delete]]]"#),
        ("COMMAND GETKEYSANDFLAGS incr a", r#"[["a", [+RW, +access, +update]]]"#, r#"[["a", ~[+RW, +access, +update]]]"#),
        ("COMMAND GETKEYSANDFLAGS append a b", r#"[["a", [+RW, +insert]]]"#, r#"[["a", ~[+RW, +insert]]]"#),
        ("COMMAND GETKEYSANDFLAGS hgetall h", r#"[["h", [+RO, +access]]]"#, r#"[["h", ~[+RO, +access]]]"#),
        ("COMMAND GETKEYSANDFLAGS hincrbyfloat h f 1", r#"[["h", [+RW, +access, +update]]]"#, r#"[["h", ~[+RW, +access, +update]]]"#),
        ("COMMAND GETKEYSANDFLAGS watch a", r#"[["a", [+RO]]]"#, r#"[["a", ~[+RO]]]"#),
        ("COMMAND GETKEYSANDFLAGS touch a", r#"[["a", [+RO]]]"#, r#"[["a", ~[+RO]]]"#),
        ("COMMAND GETKEYSANDFLAGS persist a", r#"[["a", [+RW, +update]]]"#, r#"[["a", ~[+RW, +update]]]"#),
        ("COMMAND GETKEYSANDFLAGS type a", r#"[["a", [+RO]]]"#, r#"[["a", ~[+RO]]]"#),
    ]);
}

#[test]
fn command_info_entries() {
    check_versions(&[
        ("COMMAND INFO get", r#"[["get", :2, [+readonly, +fast], :1, :1, :1, [+@read, +@string, +@fast], [], [["flags", [+RO, +access], "begin_search", ["type", "index", "spec", ["index", :1]], "find_keys", ["type", "range", "spec", ["lastkey", :0, "keystep", :1, "limit", :0]]]], []]]"#, r#"[["get", :2, ~[+readonly, +fast], :1, :1, :1, ~[+@read, +@string, +@fast], ~[], ~[{"flags": ~[+RO, +access], "begin_search": {"type": "index", "spec": {"index": :1}}, "find_keys": {"type": "range", "spec": {"lastkey": :0, "keystep": :1, "limit": :0}}}], ~[]]]"#),
        ("COMMAND INFO set", r#"[["set", :-3, [+write, +denyoom], :1, :1, :1, [+@write, +@string, +@slow], [], [["notes", "RW and ACCESS due to the optional `GET` argument", "flags", [+RW, +access, +update, +variable_flags], "begin_search", ["type", "index", "spec", ["index", :1]], "find_keys", ["type", "range", "spec", ["lastkey", :0, "keystep", :1, "limit", :0]]]], []]]"#, r#"[["set", :-3, ~[+write, +denyoom], :1, :1, :1, ~[+@write, +@string, +@slow], ~[], ~[{"notes": "RW and ACCESS due to the optional `GET` argument", "flags": ~[+RW, +access, +update, +variable_flags], "begin_search": {"type": "index", "spec": {"index": :1}}, "find_keys": {"type": "range", "spec": {"lastkey": :0, "keystep": :1, "limit": :0}}}], ~[]]]"#),
        ("COMMAND INFO mset", r#"[["mset", :-3, [+write, +denyoom], :1, :-1, :2, [+@write, +@string, +@slow], ["request_policy:multi_shard", "response_policy:all_succeeded"], [["flags", [+OW, +update], "begin_search", ["type", "index", "spec", ["index", :1]], "find_keys", ["type", "range", "spec", ["lastkey", :-1, "keystep", :2, "limit", :0]]]], []]]"#, r#"[["mset", :-3, ~[+write, +denyoom], :1, :-1, :2, ~[+@write, +@string, +@slow], ~["request_policy:multi_shard", "response_policy:all_succeeded"], ~[{"flags": ~[+OW, +update], "begin_search": {"type": "index", "spec": {"index": :1}}, "find_keys": {"type": "range", "spec": {"lastkey": :-1, "keystep": :2, "limit": :0}}}], ~[]]]"#),
        ("COMMAND INFO del", r#"[["del", :-2, [+write], :1, :-1, :1, [+@keyspace, +@write, +@slow], ["request_policy:multi_shard", "response_policy:agg_sum"], [["flags", [+RM, +delete], "begin_search", ["type", "index", "spec", ["index", :1]], "find_keys", ["type", "range", "spec", ["lastkey", :-1, "keystep", :1, "limit", :0]]]], []]]"#, r#"[["del", :-2, ~[+write], :1, :-1, :1, ~[+@keyspace, +@write, +@slow], ~["request_policy:multi_shard", "response_policy:agg_sum"], ~[{"flags": ~[+RM, +delete], "begin_search": {"type": "index", "spec": {"index": :1}}, "find_keys": {"type": "range", "spec": {"lastkey": :-1, "keystep": :1, "limit": :0}}}], ~[]]]"#),
        ("COMMAND INFO hgetall", r#"[["hgetall", :2, [+readonly], :1, :1, :1, [+@read, +@hash, +@slow], ["nondeterministic_output_order"], [["flags", [+RO, +access], "begin_search", ["type", "index", "spec", ["index", :1]], "find_keys", ["type", "range", "spec", ["lastkey", :0, "keystep", :1, "limit", :0]]]], []]]"#, r#"[["hgetall", :2, ~[+readonly], :1, :1, :1, ~[+@read, +@hash, +@slow], ~["nondeterministic_output_order"], ~[{"flags": ~[+RO, +access], "begin_search": {"type": "index", "spec": {"index": :1}}, "find_keys": {"type": "range", "spec": {"lastkey": :0, "keystep": :1, "limit": :0}}}], ~[]]]"#),
        ("COMMAND INFO nosuch get", r#"[$-1, ["get", :2, [+readonly, +fast], :1, :1, :1, [+@read, +@string, +@fast], [], [["flags", [+RO, +access], "begin_search", ["type", "index", "spec", ["index", :1]], "find_keys", ["type", "range", "spec", ["lastkey", :0, "keystep", :1, "limit", :0]]]], []]]"#, r#"[_, ["get", :2, ~[+readonly, +fast], :1, :1, :1, ~[+@read, +@string, +@fast], ~[], ~[{"flags": ~[+RO, +access], "begin_search": {"type": "index", "spec": {"index": :1}}, "find_keys": {"type": "range", "spec": {"lastkey": :0, "keystep": :1, "limit": :0}}}], ~[]]]"#),
        ("COMMAND INFO config|get", r#"[["config|get", :-3, [+admin, +noscript, +loading, +stale], :0, :0, :0, [+@admin, +@slow, +@dangerous], [], [], []]]"#, r#"[["config|get", :-3, ~[+admin, +noscript, +loading, +stale], :0, :0, :0, ~[+@admin, +@slow, +@dangerous], ~[], ~[], ~[]]]"#),
        ("COMMAND INFO CONFIG|GET", r#"[["config|get", :-3, [+admin, +noscript, +loading, +stale], :0, :0, :0, [+@admin, +@slow, +@dangerous], [], [], []]]"#, r#"[["config|get", :-3, ~[+admin, +noscript, +loading, +stale], :0, :0, :0, ~[+@admin, +@slow, +@dangerous], ~[], ~[], ~[]]]"#),
        ("COMMAND INFO client|kill", r#"[["client|kill", :-3, [+admin, +noscript, +loading, +stale], :0, :0, :0, [+@admin, +@slow, +@dangerous, +@connection], [], [], []]]"#, r#"[["client|kill", :-3, ~[+admin, +noscript, +loading, +stale], :0, :0, :0, ~[+@admin, +@slow, +@dangerous, +@connection], ~[], ~[], ~[]]]"#),
        ("COMMAND INFO config|nosuch", "[$-1]", "[_]"),
        ("COMMAND INFO get|x", "[$-1]", "[_]"),
        ("COMMAND INFO nosuch|x", "[$-1]", "[_]"),
        ("COMMAND INFO ping echo", r#"[["ping", :-1, [+fast], :0, :0, :0, [+@fast, +@connection], ["request_policy:all_shards", "response_policy:all_succeeded"], [], []], ["echo", :2, [+loading, +stale, +fast], :0, :0, :0, [+@fast, +@connection], [], [], []]]"#, r#"[["ping", :-1, ~[+fast], :0, :0, :0, ~[+@fast, +@connection], ~["request_policy:all_shards", "response_policy:all_succeeded"], ~[], ~[]], ["echo", :2, ~[+loading, +stale, +fast], :0, :0, :0, ~[+@fast, +@connection], ~[], ~[], ~[]]]"#),
        ("COMMAND INFO keys scan", r#"[["keys", :2, [+readonly], :0, :0, :0, [+@keyspace, +@read, +@slow, +@dangerous], ["request_policy:all_shards", "nondeterministic_output_order"], [], []], ["scan", :-2, [+readonly], :0, :0, :0, [+@keyspace, +@read, +@slow], ["nondeterministic_output", "request_policy:special"], [], []]]"#, r#"[["keys", :2, ~[+readonly], :0, :0, :0, ~[+@keyspace, +@read, +@slow, +@dangerous], ~["request_policy:all_shards", "nondeterministic_output_order"], ~[], ~[]], ["scan", :-2, ~[+readonly], :0, :0, :0, ~[+@keyspace, +@read, +@slow], ~["nondeterministic_output", "request_policy:special"], ~[], ~[]]]"#),
        ("COMMAND INFO getset", r#"[["getset", :3, [+write, +denyoom, +fast], :1, :1, :1, [+@write, +@string, +@fast], [], [["flags", [+RW, +access, +update], "begin_search", ["type", "index", "spec", ["index", :1]], "find_keys", ["type", "range", "spec", ["lastkey", :0, "keystep", :1, "limit", :0]]]], []]]"#, r#"[["getset", :3, ~[+write, +denyoom, +fast], :1, :1, :1, ~[+@write, +@string, +@fast], ~[], ~[{"flags": ~[+RW, +access, +update], "begin_search": {"type": "index", "spec": {"index": :1}}, "find_keys": {"type": "range", "spec": {"lastkey": :0, "keystep": :1, "limit": :0}}}], ~[]]]"#),
        ("COMMAND INFO ttl expire", r#"[["ttl", :2, [+readonly, +fast], :1, :1, :1, [+@keyspace, +@read, +@fast], ["nondeterministic_output"], [["flags", [+RO, +access], "begin_search", ["type", "index", "spec", ["index", :1]], "find_keys", ["type", "range", "spec", ["lastkey", :0, "keystep", :1, "limit", :0]]]], []], ["expire", :-3, [+write, +fast], :1, :1, :1, [+@keyspace, +@write, +@fast], [], [["flags", [+RW, +update], "begin_search", ["type", "index", "spec", ["index", :1]], "find_keys", ["type", "range", "spec", ["lastkey", :0, "keystep", :1, "limit", :0]]]], []]]"#, r#"[["ttl", :2, ~[+readonly, +fast], :1, :1, :1, ~[+@keyspace, +@read, +@fast], ~["nondeterministic_output"], ~[{"flags": ~[+RO, +access], "begin_search": {"type": "index", "spec": {"index": :1}}, "find_keys": {"type": "range", "spec": {"lastkey": :0, "keystep": :1, "limit": :0}}}], ~[]], ["expire", :-3, ~[+write, +fast], :1, :1, :1, ~[+@keyspace, +@write, +@fast], ~[], ~[{"flags": ~[+RW, +update], "begin_search": {"type": "index", "spec": {"index": :1}}, "find_keys": {"type": "range", "spec": {"lastkey": :0, "keystep": :1, "limit": :0}}}], ~[]]]"#),
    ]);
}

/// GETKEYS finds the keys the server locks and tracks, for every command that has keys, with
/// the fewest arguments it takes and with more.
#[test]
fn getkeys_of_every_command_with_keys() {
    let mut c = Client::new();
    let mut checked = 0;
    // Commands whose keys move with their arguments have requests of their own below.
    for command in COMMANDS
        .iter()
        .filter(|c| c.first_key > 0 && !c.has(crate::command::flags::MOVABLE))
    {
        let min = command.arity.unsigned_abs() as usize;
        let max = if command.arity < 0 { min + 3 } else { min };
        for argc in min..=max {
            let args: Vec<String> = (1..argc).map(|i| format!("a{i}")).collect();
            let request = format!("COMMAND GETKEYS {} {}", command.name, args.join(" "));
            let keys: Vec<String> = command
                .key_positions(argc)
                .map(|i| format!("\"a{i}\""))
                .collect();
            c.check(&[(&request, &format!("[{}]", keys.join(", ")))]);
            checked += 1;
        }
    }
    assert!(checked > 50);
}

#[test]
fn command_count_list_and_all_info() {
    let mut c = Client::new();
    let count = format!(":{}", COMMANDS.len());
    c.check(&[("COMMAND COUNT", &count)]);
    let list = c.cmd("COMMAND LIST");
    for command in COMMANDS {
        assert!(
            list.contains(&format!("\"{}\"", command.name)),
            "{}",
            command.name
        );
    }
    for sub in [
        "config|get",
        "client|kill",
        "command|getkeys",
        "pubsub|numsub",
    ] {
        assert!(list.contains(&format!("\"{sub}\"")), "{sub}");
    }
    // COMMAND and COMMAND INFO without names describe every command, in table order.
    let all = c.cmd("COMMAND");
    assert_eq!(all, c.cmd("COMMAND INFO"));
    assert!(
        all.starts_with(r#"[["ping", :-1, [+fast], :0, :0, :0, [+@fast, +@connection], "#),
        "{all}"
    );
    let header = format!("*{}\r\n*10\r\n$4\r\nping\r\n", COMMANDS.len());
    assert!(c.call(&[b"COMMAND"]).starts_with(header.as_bytes()));
}

#[test]
fn command_docs() {
    check_versions(&[
        ("COMMAND DOCS get", r#"["get", ["summary", "Returns the value of a key.", "since", "1.0.0", "group", "string", "complexity", "O(1)"]]"#, r#"{"get": {"summary": "Returns the value of a key.", "since": "1.0.0", "group": "string", "complexity": "O(1)"}}"#),
        ("COMMAND DOCS nosuch", "[]", "{}"),
    ]);
    check2(&[
        ("COMMAND DOCS getset", r#"["getset", ["summary", "Sets a key and returns its old value.", "since", "1.0.0", "group", "string", "complexity", "O(1)", "doc_flags", [+deprecated], "deprecated_since", "6.2.0", "replaced_by", "`SET` with the `!GET` argument"]]"#),
        ("COMMAND DOCS config|get nosuch", r#"["config|get", ["summary", "Get the values of configuration parameters", "since", "2.0.0", "group", "server", "complexity", "O(N) when N is the number of configuration parameters provided"]]"#),
        ("COMMAND DOCS pubsub", r#"["pubsub", ["summary", "PUBSUB CHANNELS / NUMSUB / NUMPAT.", "since", "2.8.0", "group", "pubsub", "complexity", "Depends on subcommand.", "subcommands", ["pubsub|channels", ["summary", "List active channels", "since", "2.8.0", "group", "pubsub", "complexity", "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)"], "pubsub|numsub", [..."#),
    ]);
}

/// cairn's own commands are described in the same terms.
#[test]
fn cairn_commands_in_command_info() {
    check2(&[
        ("COMMAND INFO tag.set", r#"[["tag.set", :-3, [+write, +denyoom], :1, :1, :1, [+@write, +@slow], [], [["flags", [+OW, +update], "begin_search", ["type", "index", "spec", ["index", :1]], "find_keys", ["type", "range", "spec", ["lastkey", :0, "keystep", :1, "limit", :0]]]], []]]"#),
        ("COMMAND INFO sql.query", r#"[["sql.query", :-2, [+readonly, +noscript, +no_multi], :0, :0, :0, [+@read, +@slow], [], [], []]]"#),
        ("COMMAND GETKEYS tag.set k v TAG 1 2", r#"["k"]"#),
        ("COMMAND GETKEYSANDFLAGS tag.add k 1 2", r#"[["k", [+RW, +update]]]"#),
        ("COMMAND GETKEYS tag.get WHERE 1 ANY", "-ERR The command has no key arguments"),
        ("COMMAND GETKEYS sql.query SELECT 1", "-ERR The command has no key arguments"),
        ("COMMAND LIST FILTERBY PATTERN tag.*", r#"["tag.set", "tag.add", "tag.rem", "tag.of", "tag.get", "tag.keys", "tag.count", "tag.del"]"#),
        ("COMMAND HELP", "[+COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:, ..."),
    ]);
}
