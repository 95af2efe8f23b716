//! Connection and server commands: unknown commands, wrong arity, PING/ECHO/SELECT, HELLO and
//! AUTH errors, CLIENT / CONFIG / PUBSUB subcommand errors, MULTI misuse and EXEC's replies,
//! subscribed mode.

use crate::testkit::*;

#[test]
fn unknown_commands_and_arity() {
    check_both(&[
        ("NOSUCH", "-ERR unknown command 'NOSUCH', with args beginning with: "),
        ("NOSUCH a b", "-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' "),
        (r#"nosuch "with space""#, "-ERR unknown command 'nosuch', with args beginning with: 'with space' "),
        ("GET", "-ERR wrong number of arguments for 'get' command"),
        ("GET a b", "-ERR wrong number of arguments for 'get' command"),
        ("SET a", "-ERR wrong number of arguments for 'set' command"),
        ("PING a b", "-ERR wrong number of arguments for 'ping' command"),
        ("ECHO", "-ERR wrong number of arguments for 'echo' command"),
        ("ECHO a b", "-ERR wrong number of arguments for 'echo' command"),
        ("SELECT", "-ERR wrong number of arguments for 'select' command"),
        ("SELECT 0", "+OK"),
        // cairn has one database (as redis-server --databases 1; its default is 16).
        ("SELECT 1", "-ERR DB index is out of range"),
        ("SELECT abc", "-ERR value is not an integer or out of range"),
        ("TIME x", "-ERR wrong number of arguments for 'time' command"),
        ("DBSIZE x", "-ERR wrong number of arguments for 'dbsize' command"),
        ("QUIT x y", "+OK"),
    ]);
}

#[test]
fn ping_echo() {
    check_both(&[
        ("PING", "+PONG"),
        ("PING hello", r#""hello""#),
        ("ECHO hello", r#""hello""#),
        (r#"ECHO """#, r#""""#),
    ]);
}

#[test]
fn hello_errors() {
    check_both(&[
        ("HELLO 4", "-NOPROTO unsupported protocol version"),
        ("HELLO abc", "-ERR Protocol version is not an integer or out of range"),
        ("HELLO 3 BOGUS", "-ERR Syntax error in HELLO option 'BOGUS'"),
        ("HELLO 2 AUTH a", "-ERR Syntax error in HELLO option 'AUTH'"),
        ("HELLO 2 SETNAME", "-ERR Syntax error in HELLO option 'SETNAME'"),
        (r#"HELLO 2 SETNAME "a b""#, "-ERR Client names cannot contain spaces, newlines or special characters."),
        ("AUTH x", "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"),
        ("AUTH a b c", "-ERR syntax error"),
    ]);
}

#[test]
fn client_subcommand_errors() {
    check_versions(&[
        ("CLIENT", "-ERR wrong number of arguments for 'client' command", "="),
        ("CLIENT BOGUS", "-ERR unknown subcommand 'BOGUS'. Try CLIENT HELP.", "="),
        ("CLIENT ID x", "-ERR wrong number of arguments for 'client|id' command", "="),
        ("CLIENT GETNAME x", "-ERR wrong number of arguments for 'client|getname' command", "="),
        ("CLIENT SETNAME", "-ERR wrong number of arguments for 'client|setname' command", "="),
        (r#"CLIENT SETNAME "a b""#, "-ERR Client names cannot contain spaces, newlines or special characters.", "="),
        ("CLIENT SETNAME ok", "+OK", "="),
        ("CLIENT GETNAME", r#""ok""#, "="),
        (r#"CLIENT SETNAME """#, "+OK", "="),
        ("CLIENT GETNAME", "$-1", "_"),
        ("CLIENT INFO x", "-ERR wrong number of arguments for 'client|info' command", "="),
        ("CLIENT KILL", "-ERR wrong number of arguments for 'client|kill' command", "="),
        ("CLIENT KILL 1.2.3.4:5", "-ERR No such client", "="),
        ("CLIENT KILL ID abc", "-ERR client-id should be greater than 0", "="),
        ("CLIENT KILL ID 999999", ":0", "="),
        ("CLIENT KILL BOGUS x", "-ERR syntax error", "="),
        ("CLIENT KILL ID", "-ERR No such client", "="),
        ("CLIENT KILL TYPE bogus", "-ERR Unknown client type 'bogus'", "="),
        ("CLIENT KILL SKIPME maybe", "-ERR syntax error", "="),
        ("CLIENT REPLY", "-ERR wrong number of arguments for 'client|reply' command", "="),
        ("CLIENT REPLY MAYBE", "-ERR syntax error", "="),
        ("CLIENT TRACKING", "-ERR wrong number of arguments for 'client|tracking' command", "="),
        ("CLIENT TRACKING maybe", "-ERR syntax error", "="),
        ("CLIENT TRACKING on BOGUS", "-ERR syntax error", "="),
        ("CLIENT TRACKING off x", "-ERR syntax error", "="),
        ("CLIENT CACHING yes", "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled", "="),
        ("CLIENT CACHING maybe", "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled", "="),
        ("CLIENT GETREDIR", ":-1", "="),
        ("CLIENT GETREDIR x", "-ERR wrong number of arguments for 'client|getredir' command", "="),
        ("CLIENT TRACKINGINFO x", "-ERR wrong number of arguments for 'client|trackinginfo' command", "="),
        ("CLIENT NO-EVICT", "-ERR wrong number of arguments for 'client|no-evict' command", "="),
        ("CLIENT NO-EVICT maybe", "-ERR syntax error", "="),
        ("CLIENT NO-EVICT on", "+OK", "="),
        ("CLIENT NO-EVICT off", "+OK", "="),
        ("CLIENT LIST TYPE bogus", "-ERR Unknown client type 'bogus'", "="),
        ("CLIENT LIST ID abc", "-ERR Invalid client ID", "="),
        ("CLIENT LIST BOGUS", "-ERR syntax error", "="),
    ]);
}

#[test]
fn config_errors() {
    check_versions(&[
        ("CONFIG", "-ERR wrong number of arguments for 'config' command", "="),
        ("CONFIG BOGUS", "-ERR unknown subcommand 'BOGUS'. Try CONFIG HELP.", "="),
        ("CONFIG GET", "-ERR wrong number of arguments for 'config|get' command", "="),
        ("CONFIG SET maxmemory", "-ERR wrong number of arguments for 'config|set' command", "="),
        ("CONFIG SET nosuchparam 1", "-ERR Unknown option or number of arguments for CONFIG SET - 'nosuchparam'", "="),
        ("CONFIG RESETSTAT x", "-ERR wrong number of arguments for 'config|resetstat' command", "="),
        ("CONFIG GET nosuchparam", "[]", "{}"),
    ]);
}

#[test]
fn multi_errors() {
    check_both(&[
        ("MULTI", "+OK"),
        ("MULTI", "-ERR MULTI calls can not be nested"),
        ("EXEC", "[]"),
        ("EXEC", "-ERR EXEC without MULTI"),
        ("DISCARD", "-ERR DISCARD without MULTI"),
        ("WATCH", "-ERR wrong number of arguments for 'watch' command"),
        ("MULTI", "+OK"),
        ("WATCH k", "-ERR WATCH inside MULTI is not allowed"),
        ("DISCARD", "+OK"),
    ]);
}

#[test]
fn pubsub_errors() {
    check_both(&[
        ("PUBSUB", "-ERR wrong number of arguments for 'pubsub' command"),
        ("PUBSUB BOGUS", "-ERR unknown subcommand 'BOGUS'. Try PUBSUB HELP."),
        ("PUBSUB NUMPAT", ":0"),
        ("PUBSUB NUMPAT x", "-ERR wrong number of arguments for 'pubsub|numpat' command"),
        ("PUBSUB CHANNELS", "[]"),
        ("PUBSUB NUMSUB", "[]"),
        ("PUBSUB NUMSUB a b", r#"["a", :0, "b", :0]"#),
        ("PUBLISH ch", "-ERR wrong number of arguments for 'publish' command"),
        ("PUBLISH ch msg", ":0"),
        ("SUBSCRIBE", "-ERR wrong number of arguments for 'subscribe' command"),
    ]);
}


#[test]
fn connections_share_the_server() {
    let mut a = Client::new();
    let mut b = a.other();
    a.check(&[("SET k v", "+OK"), ("WATCH k", "+OK")]);
    b.check(&[("SET k w", "+OK")]);
    a.check(&[("MULTI", "+OK"), ("GET k", "+QUEUED"), ("EXEC", "*-1")]);
    let kill = format!("CLIENT KILL ID {}", b.info.id);
    a.check(&[(kill.as_str(), ":1")]);
    // The runtime closes a killed connection; here it is only marked.
    assert!(b.info.killed());
}

#[test]
fn transaction_replies() {
    check_both(&[
        ("MULTI", "+OK"),
        ("SET a 1", "+QUEUED"),
        ("INCR a", "+QUEUED"),
        ("GET a", "+QUEUED"),
        ("HSET a f v", "+QUEUED"),
        ("EXEC", r#"[+OK, :2, "2", -WRONGTYPE Operation against a key holding the wrong kind of value]"#),
        ("MULTI", "+OK"),
        ("SET b 1", "+QUEUED"),
        ("NOSUCH x", "-ERR unknown command 'NOSUCH', with args beginning with: 'x' "),
        ("EXEC", "-EXECABORT Transaction discarded because of previous errors."),
        ("EXISTS b", ":0"),
        ("MULTI", "+OK"),
        ("GET a a", "-ERR wrong number of arguments for 'get' command"),
        ("EXEC", "-EXECABORT Transaction discarded because of previous errors."),
        ("MULTI", "+OK"),
        ("SET c 1", "+QUEUED"),
        ("DISCARD", "+OK"),
        ("EXISTS c", ":0"),
        ("MULTI", "+OK"),
        ("EXEC", "[]"),
        ("UNWATCH", "+OK"),
        ("WATCH a b", "+OK"),
        ("UNWATCH", "+OK"),
    ]);
}

/// Subscription confirmations are one reply per channel (pushes in RESP3); in RESP2 only some
/// commands are allowed while subscribed, and PING answers in the subscribed form.
#[test]
fn subscribe_shapes() {
    check_versions(&[
        ("SUBSCRIBE ch1 ch2", r#"["subscribe", "ch1", :1] | ["subscribe", "ch2", :2]"#, r#">["subscribe", "ch1", :1] | >["subscribe", "ch2", :2]"#),
        ("PSUBSCRIBE p*", r#"["psubscribe", "p*", :3]"#, r#">["psubscribe", "p*", :3]"#),
        ("PING", r#"["pong", ""]"#, "+PONG"),
        ("PING hi", r#"["pong", "hi"]"#, r#""hi""#),
        ("GET a", "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", "_"),
        ("UNSUBSCRIBE ch1", r#"["unsubscribe", "ch1", :2]"#, r#">["unsubscribe", "ch1", :2]"#),
        ("PUNSUBSCRIBE", r#"["punsubscribe", "p*", :1]"#, r#">["punsubscribe", "p*", :1]"#),
        ("UNSUBSCRIBE", r#"["unsubscribe", "ch2", :0]"#, r#">["unsubscribe", "ch2", :0]"#),
        ("PING", "+PONG", "="),
    ]);
}

#[test]
fn hash_shapes_in_transactions() {
    check_versions(&[
        ("HSET h f v", ":1", "="),
        ("MULTI", "+OK", "="),
        ("HGETALL h", "+QUEUED", "="),
        ("HMGET h f nope", "+QUEUED", "="),
        ("HGET h nope", "+QUEUED", "="),
        ("EXEC", r#"[["f", "v"], ["v", $-1], $-1]"#, r#"[{"f": "v"}, ["v", _], _]"#),
    ]);
}
