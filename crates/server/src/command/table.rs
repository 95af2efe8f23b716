//! The one command table. Arity follows Redis: N means exactly N arguments including the name,
//! -N means at least N. Keys are at positions first..=last (negative: from the end) by step.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::flags::*;
use super::{
    blocking_cmd, hash_ttl, hashes, info, introspect, keys, lists, mpop, object, observe_cmd,
    persist_cmd, pubsub, replication_cmd, reset, scripting, server, sets, sql, strings, tags, txn,
    wb, zrange, zsets, Handler,
};

pub struct Command {
    pub name: &'static str,
    pub arity: i32,
    pub flags: u16,
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub handler: Handler,
    pub summary: &'static str,
}

impl Command {
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    /// Positions of the keys among `argc` arguments.
    pub fn key_positions(&self, argc: usize) -> impl Iterator<Item = usize> {
        let argc = argc as i32;
        let last = if self.last_key < 0 {
            argc + self.last_key
        } else {
            self.last_key.min(argc - 1)
        };
        let (first, step) = (self.first_key, self.step.max(1));
        let range = if first > 0 && last >= first {
            first..last + 1
        } else {
            0..0
        };
        range.step_by(step as usize).map(|i| i as usize)
    }
}

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u16,
    keys: (i32, i32, i32),
    handler: Handler,
    summary: &'static str,
) -> Command {
    Command {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        step: keys.2,
        handler,
        summary,
    }
}

const NONE: (i32, i32, i32) = (0, 0, 0);
const ONE: (i32, i32, i32) = (1, 1, 1);
const ALL: (i32, i32, i32) = (1, -1, 1);
const PAIRS: (i32, i32, i32) = (1, -1, 2);
const TWO: (i32, i32, i32) = (1, 2, 1);

const R: u16 = READONLY;
const RF: u16 = READONLY | FAST;
const W: u16 = WRITE;
const WF: u16 = WRITE | FAST;

#[rustfmt::skip]
pub static COMMANDS: &[Command] = &[
    // Connection and server.
    cmd("ping", -1, FAST | PUBSUB, NONE, server::ping, "Returns the server's liveliness response."),
    cmd("echo", 2, FAST, NONE, server::echo, "Returns the given string."),
    cmd("hello", -1, FAST | NOAUTH, NONE, server::hello, "Handshakes with the server, choosing RESP2 or RESP3."),
    cmd("auth", -2, FAST | NOAUTH, NONE, server::auth, "Authenticates the connection."),
    cmd("quit", -1, FAST | NOAUTH | NOQUEUE | PUBSUB, NONE, server::quit, "Closes the connection."),
    cmd("reset", 1, FAST | NOAUTH | NOQUEUE | PUBSUB, NONE, reset::reset, "Resets the connection's state (MONITOR, MULTI, subscriptions, tracking...)."),
    cmd("select", 2, FAST, NONE, server::select, "Changes the selected database (only 0 exists)."),
    cmd("info", -1, 0, NONE, info::info, "Returns information and statistics about the server."),
    cmd("role", 1, FAST, NONE, replication_cmd::role, "Returns the replication role."),
    cmd("replicaof", 3, ADMIN, NONE, replication_cmd::replicaof, "Configures a server as replica of another, or promotes it to a master."),
    cmd("slaveof", 3, ADMIN, NONE, replication_cmd::replicaof, "Sets a Redis server as a replica of another, or promotes it to being a master."),
    cmd("wait", 3, 0, NONE, replication_cmd::wait, "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed."),
    cmd("replconf", -1, ADMIN, NONE, replication_cmd::replconf, "An internal command for configuring the replication stream."),
    cmd("psync", -3, ADMIN | NOMULTI, NONE, replication_cmd::psync, "An internal command used in replication."),
    cmd("repl.put", 2, WRITE | INTERNAL, NONE, replication_cmd::repl_put, "Replication stream: a record as the primary has it."),
    cmd("repl.ttl", 6, WRITE | INTERNAL, NONE, replication_cmd::repl_ttl, "Replication stream: a record's deadline and CAS."),
    cmd("repl.cas", 5, WRITE | INTERNAL, NONE, replication_cmd::repl_cas, "Replication stream: a record's CAS."),
    cmd("repl.del", 4, WRITE | INTERNAL, NONE, replication_cmd::repl_del, "Replication stream: a record removed on the primary."),
    cmd("repl.flush", -1, WRITE | INTERNAL, NONE, replication_cmd::repl_flush, "Replication stream: every record removed (FLUSHALL)."),
    cmd("config", -2, ADMIN, NONE, server::config, "CONFIG GET / SET / RESETSTAT / REWRITE."),
    cmd("client", -2, 0, NONE, server::client, "CLIENT ID / SETNAME / GETNAME / LIST / INFO / KILL / SETINFO."),
    cmd("command", -1, 0, NONE, introspect::command, "Returns details about commands."),
    cmd("time", 1, FAST, NONE, server::time, "Returns the server time."),
    cmd("monitor", 1, ADMIN, NONE, observe_cmd::monitor, "Listens for all commands the server runs, in real time."),
    cmd("slowlog", -2, ADMIN, NONE, observe_cmd::slowlog, "SLOWLOG GET / LEN / RESET: the slowest recent commands."),
    cmd("latency", -2, ADMIN, NONE, observe_cmd::latency, "LATENCY LATEST / HISTORY / RESET: latency samples per event."),
    cmd("dbsize", 1, RF | KEYSPACE, NONE, keys::dbsize, "Returns the number of keys."),
    cmd("flushall", -1, W | KEYSPACE, NONE, keys::flushall, "Removes all keys."),
    cmd("flushdb", -1, W | KEYSPACE, NONE, keys::flushall, "Removes all keys of the (only) database."),
    // Snapshots.
    cmd("save", 1, ADMIN | NOMULTI, NONE, persist_cmd::save, "Saves a snapshot of the dataset to disk, waiting for it."),
    cmd("bgsave", -1, ADMIN, NONE, persist_cmd::bgsave, "Saves a snapshot of the dataset to disk in the background."),
    cmd("lastsave", 1, FAST, NONE, persist_cmd::lastsave, "Returns the Unix time of the last successful save."),
    cmd("shutdown", -1, ADMIN | NOMULTI, NONE, persist_cmd::shutdown, "Saves a snapshot (as configured) and stops the server."),
    cmd("debug", -2, ADMIN, NONE, persist_cmd::debug, "DEBUG RELOAD: saves, empties and reloads the dataset (for tests)."),
    // Transactions.
    cmd("multi", 1, FAST | NOQUEUE | NOMULTI, NONE, txn::multi, "Starts a transaction."),
    cmd("exec", 1, NOQUEUE, NONE, txn::exec, "Executes the queued commands atomically."),
    cmd("discard", 1, FAST | NOQUEUE, NONE, txn::discard, "Discards the queued commands."),
    cmd("watch", -2, FAST | NOQUEUE | NOMULTI, ALL, txn::watch, "Aborts the next EXEC if these keys change."),
    // Queued inside MULTI, as in Redis (it then runs, harmlessly, as part of EXEC).
    cmd("unwatch", 1, FAST, NONE, txn::unwatch, "Forgets all watched keys."),
    // Lua scripting (`scripting`): atomic by themselves, see `flags::SCRIPTING`.
    cmd("eval", -3, SCRIPTING, NONE, scripting::eval, "Executes a server-side Lua script."),
    cmd("evalsha", -3, SCRIPTING, NONE, scripting::evalsha, "Executes a cached server-side Lua script by its SHA1 digest."),
    cmd("eval_ro", -3, SCRIPTING | READONLY, NONE, scripting::eval_ro, "Executes a read-only server-side Lua script."),
    cmd("evalsha_ro", -3, SCRIPTING | READONLY, NONE, scripting::evalsha_ro, "Executes a cached read-only server-side Lua script by its SHA1 digest."),
    cmd("script", -2, ALLOW_BUSY, NONE, scripting::script, "SCRIPT LOAD / EXISTS / FLUSH / KILL: the Lua script cache."),
    // Strings.
    cmd("get", 2, RF, ONE, strings::get, "Returns the value of a key."),
    cmd("set", -3, W, ONE, strings::set, "Sets the value of a key, with expiry and conditions."),
    cmd("setnx", 3, WF, ONE, strings::setnx, "Sets a key only if it does not exist."),
    cmd("setex", 4, W, ONE, strings::setex, "Sets a key with an expiry in seconds."),
    cmd("psetex", 4, W, ONE, strings::psetex, "Sets a key with an expiry in milliseconds."),
    cmd("getset", 3, WF, ONE, strings::getset, "Sets a key and returns its old value."),
    cmd("getdel", 2, WF, ONE, strings::getdel, "Returns a key's value and deletes it."),
    cmd("getex", -2, WF, ONE, strings::getex, "Returns a key's value and changes its expiry."),
    cmd("mget", -2, RF, ALL, strings::mget, "Returns the values of several keys."),
    cmd("mset", -3, W, PAIRS, strings::mset, "Sets several keys atomically."),
    cmd("msetnx", -3, W, PAIRS, strings::msetnx, "Sets several keys only if none exists."),
    cmd("incr", 2, WF, ONE, strings::incr, "Increments an integer value by one."),
    cmd("decr", 2, WF, ONE, strings::decr, "Decrements an integer value by one."),
    cmd("incrby", 3, WF, ONE, strings::incrby, "Increments an integer value."),
    cmd("decrby", 3, WF, ONE, strings::decrby, "Decrements an integer value."),
    cmd("incrbyfloat", 3, WF, ONE, strings::incrbyfloat, "Increments a float value."),
    cmd("append", 3, WF, ONE, strings::append, "Appends to a value."),
    cmd("strlen", 2, RF, ONE, strings::strlen, "Returns the length of a value."),
    cmd("getrange", 4, R, ONE, strings::getrange, "Returns a substring of a value."),
    cmd("setrange", 4, W, ONE, strings::setrange, "Overwrites part of a value."),
    // Keys and expiry.
    cmd("del", -2, W, ALL, keys::del, "Deletes keys."),
    cmd("unlink", -2, WF, ALL, keys::del, "Deletes keys, freeing memory in the background."),
    cmd("exists", -2, RF, ALL, keys::exists, "Counts how many of the keys exist."),
    cmd("type", 2, RF, ONE, keys::type_of, "Returns the type of a key's value."),
    cmd("expire", -3, WF, ONE, keys::expire, "Sets a key's time to live in seconds."),
    cmd("pexpire", -3, WF, ONE, keys::pexpire, "Sets a key's time to live in milliseconds."),
    cmd("expireat", -3, WF, ONE, keys::expireat, "Sets a key's deadline as a Unix time in seconds."),
    cmd("pexpireat", -3, WF, ONE, keys::pexpireat, "Sets a key's deadline as a Unix time in milliseconds."),
    cmd("ttl", 2, RF, ONE, keys::ttl, "Returns a key's time to live in seconds."),
    cmd("pttl", 2, RF, ONE, keys::pttl, "Returns a key's time to live in milliseconds."),
    cmd("expiretime", 2, RF, ONE, keys::expiretime, "Returns a key's deadline as a Unix time in seconds."),
    cmd("pexpiretime", 2, RF, ONE, keys::pexpiretime, "Returns a key's deadline as a Unix time in milliseconds."),
    cmd("persist", 2, WF, ONE, keys::persist, "Removes a key's expiry."),
    cmd("touch", -2, RF, ALL, keys::exists, "Counts the keys that exist, marking them used."),
    cmd("scan", -2, R | KEYSPACE, NONE, keys::scan, "Iterates over the keys."),
    cmd("keys", 2, R | KEYSPACE, NONE, keys::keys, "Returns the keys matching a pattern."),
    cmd("rename", 3, W, TWO, keys::rename, "Renames a key, replacing the destination."),
    cmd("renamenx", 3, WF, TWO, keys::renamenx, "Renames a key only if the new name does not exist."),
    cmd("copy", -3, W, TWO, keys::copy, "Copies a key's value (with its expiry and tags) to another key."),
    cmd("randomkey", 1, R | KEYSPACE, NONE, keys::randomkey, "Returns a random key."),
    cmd("object", -2, 0, NONE, object::object, "OBJECT ENCODING / FREQ / IDLETIME / REFCOUNT: a key's internals."),
    cmd("memory", -2, 0, NONE, object::memory, "MEMORY USAGE / STATS / DOCTOR: the bytes a key takes, where memory goes."),
    // Hashes.
    cmd("hset", -4, WF, ONE, hashes::hset, "Sets fields of a hash."),
    cmd("hmset", -4, WF, ONE, hashes::hmset, "Sets fields of a hash (replies OK)."),
    cmd("hsetnx", 4, WF, ONE, hashes::hsetnx, "Sets a field of a hash only if it does not exist."),
    cmd("hget", 3, RF, ONE, hashes::hget, "Returns a field of a hash."),
    cmd("hmget", -3, RF, ONE, hashes::hmget, "Returns fields of a hash."),
    cmd("hgetall", 2, R, ONE, hashes::hgetall, "Returns all fields and values of a hash."),
    cmd("hdel", -3, WF, ONE, hashes::hdel, "Deletes fields of a hash."),
    cmd("hexists", 3, RF, ONE, hashes::hexists, "Whether a field of a hash exists."),
    cmd("hlen", 2, RF, ONE, hashes::hlen, "Returns the number of fields of a hash."),
    cmd("hstrlen", 3, RF, ONE, hashes::hstrlen, "Returns the length of a field's value."),
    cmd("hkeys", 2, R, ONE, hashes::hkeys, "Returns the fields of a hash."),
    cmd("hvals", 2, R, ONE, hashes::hvals, "Returns the values of a hash."),
    cmd("hincrby", 4, WF, ONE, hashes::hincrby, "Increments an integer field of a hash."),
    cmd("hincrbyfloat", 4, WF, ONE, hashes::hincrbyfloat, "Increments a float field of a hash."),
    cmd("hscan", -3, R, ONE, hashes::hscan, "Iterates over the fields (and values) of a hash."),
    cmd("hrandfield", -2, R, ONE, hashes::hrandfield, "Returns random fields of a hash."),
    cmd("hexpire", -6, WF, ONE, hash_ttl::hexpire, "Sets a deadline on fields of a hash, in seconds from now."),
    cmd("hpexpire", -6, WF, ONE, hash_ttl::hpexpire, "Sets a deadline on fields of a hash, in milliseconds from now."),
    cmd("hexpireat", -6, WF, ONE, hash_ttl::hexpireat, "Sets a deadline on fields of a hash, as a Unix time in seconds."),
    cmd("hpexpireat", -6, WF, ONE, hash_ttl::hpexpireat, "Sets a deadline on fields of a hash, as a Unix time in milliseconds."),
    cmd("httl", -5, RF, ONE, hash_ttl::httl, "Returns the seconds left to fields of a hash."),
    cmd("hpttl", -5, RF, ONE, hash_ttl::hpttl, "Returns the milliseconds left to fields of a hash."),
    cmd("hexpiretime", -5, RF, ONE, hash_ttl::hexpiretime, "Returns the deadlines of fields of a hash, as Unix times in seconds."),
    cmd("hpexpiretime", -5, RF, ONE, hash_ttl::hpexpiretime, "Returns the deadlines of fields of a hash, as Unix times in milliseconds."),
    cmd("hpersist", -5, WF, ONE, hash_ttl::hpersist, "Removes the deadlines of fields of a hash."),
    // Sets.
    cmd("sadd", -3, WRITE | FAST, (1, 1, 1), sets::sadd, "Add one or more members to a set."),
    cmd("srem", -3, WRITE | FAST, (1, 1, 1), sets::srem, "Remove one or more members from a set."),
    cmd("smembers", 2, READONLY, (1, 1, 1), sets::smembers, "Get all the members in a set."),
    cmd("sismember", 3, READONLY | FAST, (1, 1, 1), sets::sismember, "Determine if a given value is a member of a set."),
    cmd("smismember", -3, READONLY | FAST, (1, 1, 1), sets::smismember, "Returns the membership associated with the given elements for a set."),
    cmd("scard", 2, READONLY | FAST, (1, 1, 1), sets::scard, "Get the number of members in a set."),
    cmd("spop", -2, WRITE | FAST, (1, 1, 1), sets::spop, "Remove and return one or multiple random members from a set."),
    cmd("srandmember", -2, READONLY, (1, 1, 1), sets::srandmember, "Get one or multiple random members from a set."),
    cmd("sscan", -3, READONLY, (1, 1, 1), sets::sscan, "Incrementally iterate Set elements."),
    cmd("smove", 4, WRITE | FAST, (1, 2, 1), sets::smove, "Move a member from one set to another."),
    cmd("sinter", -2, READONLY, (1, -1, 1), sets::sinter, "Intersect multiple sets."),
    cmd("sunion", -2, READONLY, (1, -1, 1), sets::sunion, "Add multiple sets."),
    cmd("sdiff", -2, READONLY, (1, -1, 1), sets::sdiff, "Subtract multiple sets."),
    cmd("sinterstore", -3, WRITE, (1, -1, 1), sets::sinterstore, "Intersect multiple sets and store the resulting set in a key."),
    cmd("sunionstore", -3, WRITE, (1, -1, 1), sets::sunionstore, "Add multiple sets and store the resulting set in a key."),
    cmd("sdiffstore", -3, WRITE, (1, -1, 1), sets::sdiffstore, "Subtract multiple sets and store the resulting set in a key."),
    cmd("sintercard", -3, READONLY | MOVABLE, (0, 0, 0), sets::sintercard, "Intersect multiple sets and return the cardinality of the result."),
    // Sorted sets.
    cmd("zadd", -4, WRITE | FAST, (1, 1, 1), zsets::zadd, "Add one or more members to a sorted set, or update its score if it already exists."),
    cmd("zrem", -3, WRITE | FAST, (1, 1, 1), zsets::zrem, "Remove one or more members from a sorted set."),
    cmd("zscore", 3, READONLY | FAST, (1, 1, 1), zsets::zscore, "Get the score associated with the given member in a sorted set."),
    cmd("zmscore", -3, READONLY | FAST, (1, 1, 1), zsets::zmscore, "Get the score associated with the given members in a sorted set."),
    cmd("zincrby", 4, WRITE | FAST, (1, 1, 1), zsets::zincrby, "Increment the score of a member in a sorted set."),
    cmd("zcard", 2, READONLY | FAST, (1, 1, 1), zsets::zcard, "Get the number of members in a sorted set."),
    cmd("zcount", 4, READONLY | FAST, (1, 1, 1), zrange::zcount, "Count the members in a sorted set with scores within the given values."),
    cmd("zlexcount", 4, READONLY | FAST, (1, 1, 1), zrange::zlexcount, "Count the number of members in a sorted set between a given lexicographical range."),
    cmd("zrange", -4, READONLY, (1, 1, 1), zrange::zrange, "Return a range of members in a sorted set."),
    cmd("zrangestore", -5, WRITE, (1, 2, 1), zrange::zrangestore, "Store a range of members from sorted set into another key."),
    cmd("zrangebyscore", -4, READONLY, (1, 1, 1), zrange::zrangebyscore, "Return a range of members in a sorted set, by score."),
    cmd("zrevrange", -4, READONLY, (1, 1, 1), zrange::zrevrange, "Return a range of members in a sorted set, by index, with scores ordered from high to low."),
    cmd("zrevrangebyscore", -4, READONLY, (1, 1, 1), zrange::zrevrangebyscore, "Return a range of members in a sorted set, by score, with scores ordered from high to low."),
    cmd("zrangebylex", -4, READONLY, (1, 1, 1), zrange::zrangebylex, "Return a range of members in a sorted set, by lexicographical range."),
    cmd("zrevrangebylex", -4, READONLY, (1, 1, 1), zrange::zrevrangebylex, "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings."),
    cmd("zrank", -3, READONLY | FAST, (1, 1, 1), zsets::zrank, "Determine the index of a member in a sorted set."),
    cmd("zrevrank", -3, READONLY | FAST, (1, 1, 1), zsets::zrevrank, "Determine the index of a member in a sorted set, with scores ordered from high to low."),
    cmd("zremrangebyscore", 4, WRITE, (1, 1, 1), zrange::zremrangebyscore, "Remove all members in a sorted set within the given scores."),
    cmd("zremrangebyrank", 4, WRITE, (1, 1, 1), zrange::zremrangebyrank, "Remove all members in a sorted set within the given indexes."),
    cmd("zremrangebylex", 4, WRITE, (1, 1, 1), zrange::zremrangebylex, "Remove all members in a sorted set between the given lexicographical range."),
    cmd("zpopmin", -2, WRITE | FAST, (1, 1, 1), zsets::zpopmin, "Remove and return members with the lowest scores in a sorted set."),
    cmd("zpopmax", -2, WRITE | FAST, (1, 1, 1), zsets::zpopmax, "Remove and return members with the highest scores in a sorted set."),
    cmd("zscan", -3, READONLY, (1, 1, 1), zsets::zscan, "Incrementally iterate sorted sets elements and associated scores."),
    cmd("zunionstore", -4, WRITE | MOVABLE, (1, 1, 1), zsets::zunionstore, "Add multiple sorted sets and store the resulting sorted set in a new key."),
    cmd("zinterstore", -4, WRITE | MOVABLE, (1, 1, 1), zsets::zinterstore, "Intersect multiple sorted sets and store the resulting sorted set in a new key."),
    cmd("zdiffstore", -4, WRITE | MOVABLE, (1, 1, 1), zsets::zdiffstore, "Subtract multiple sorted sets and store the resulting sorted set in a new key."),
    cmd("zunion", -3, READONLY | MOVABLE, (0, 0, 0), zsets::zunion, "Add multiple sorted sets."),
    cmd("zinter", -3, READONLY | MOVABLE, (0, 0, 0), zsets::zinter, "Intersect multiple sorted sets."),
    cmd("zdiff", -3, READONLY | MOVABLE, (0, 0, 0), zsets::zdiff, "Subtract multiple sorted sets."),
    cmd("zintercard", -3, READONLY | MOVABLE, (0, 0, 0), zsets::zintercard, "Intersect multiple sorted sets and return the cardinality of the result."),
    cmd("zrandmember", -2, READONLY, (1, 1, 1), zsets::zrandmember, "Get one or multiple random elements from a sorted set."),
    // Lists.
    cmd("lpush", -3, WRITE | FAST, (1, 1, 1), lists::lpush, "Prepend one or multiple elements to a list."),
    cmd("rpush", -3, WRITE | FAST, (1, 1, 1), lists::rpush, "Append one or multiple elements to a list."),
    cmd("lpushx", -3, WRITE | FAST, (1, 1, 1), lists::lpushx, "Prepend an element to a list, only if the list exists."),
    cmd("rpushx", -3, WRITE | FAST, (1, 1, 1), lists::rpushx, "Append an element to a list, only if the list exists."),
    cmd("lpop", -2, WRITE | FAST, (1, 1, 1), lists::lpop, "Remove and get the first elements in a list."),
    cmd("rpop", -2, WRITE | FAST, (1, 1, 1), lists::rpop, "Remove and get the last elements in a list."),
    cmd("lrange", 4, READONLY, (1, 1, 1), lists::lrange, "Get a range of elements from a list."),
    cmd("llen", 2, READONLY | FAST, (1, 1, 1), lists::llen, "Get the length of a list."),
    cmd("lindex", 3, READONLY, (1, 1, 1), lists::lindex, "Get an element from a list by its index."),
    cmd("lset", 4, WRITE, (1, 1, 1), lists::lset, "Set the value of an element in a list by its index."),
    cmd("lrem", 4, WRITE, (1, 1, 1), lists::lrem, "Remove elements from a list."),
    cmd("ltrim", 4, WRITE, (1, 1, 1), lists::ltrim, "Trim a list to the specified range."),
    cmd("linsert", 5, WRITE, (1, 1, 1), lists::linsert, "Insert an element before or after another element in a list."),
    cmd("lpos", -3, READONLY, (1, 1, 1), lists::lpos, "Return the index of matching elements on a list."),
    cmd("lmove", 5, WRITE, (1, 2, 1), lists::lmove, "Pop an element from a list, push it to another list and return it."),
    cmd("rpoplpush", 3, WRITE, (1, 2, 1), lists::rpoplpush, "Remove the last element in a list, prepend it to another list and return it."),
    // Blocking list pops (the client waits, its I/O thread does not).
    cmd("blpop", -3, WRITE, (1, -2, 1), blocking_cmd::blpop, "Remove and get the first element in a list, or block until one is available."),
    cmd("brpop", -3, WRITE, (1, -2, 1), blocking_cmd::brpop, "Remove and get the last element in a list, or block until one is available."),
    cmd("blmove", 6, WRITE, (1, 2, 1), blocking_cmd::blmove, "Pop an element from a list, push it to another list and return it; or block until one is available."),
    cmd("brpoplpush", 4, WRITE, (1, 2, 1), blocking_cmd::brpoplpush, "Pop an element from a list, push it to another list and return it; or block until one is available."),
    cmd("bzpopmin", -3, WRITE | FAST, (1, -2, 1), blocking_cmd::bzpopmin, "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available."),
    cmd("bzpopmax", -3, WRITE | FAST, (1, -2, 1), blocking_cmd::bzpopmax, "Remove and return the member with the highest score from one or more sorted sets, or block until one is available."),
    cmd("lmpop", -4, WRITE | MOVABLE, (0, 0, 0), mpop::lmpop, "Pop elements from the first non-empty list."),
    cmd("zmpop", -4, WRITE | MOVABLE, (0, 0, 0), mpop::zmpop, "Remove and return members with scores from the first non-empty sorted set."),
    cmd("blmpop", -5, WRITE | MOVABLE, (0, 0, 0), mpop::blmpop, "Pop elements from the first non-empty list, or block until one is available."),
    cmd("bzmpop", -5, WRITE | MOVABLE, (0, 0, 0), mpop::bzmpop, "Remove and return members with scores from the first non-empty sorted set, or block until one is available."),
    // Publish/subscribe.
    cmd("subscribe", -2, PUBSUB, NONE, pubsub::subscribe, "Listens for messages on channels."),
    cmd("unsubscribe", -1, PUBSUB, NONE, pubsub::unsubscribe, "Stops listening on channels."),
    cmd("psubscribe", -2, PUBSUB, NONE, pubsub::psubscribe, "Listens for messages on channels matching patterns."),
    cmd("punsubscribe", -1, PUBSUB, NONE, pubsub::punsubscribe, "Stops listening on patterns."),
    cmd("publish", 3, FAST, NONE, pubsub::publish, "Posts a message to a channel."),
    cmd("pubsub", -2, 0, NONE, pubsub::pubsub, "PUBSUB CHANNELS / NUMSUB / NUMPAT."),
    // Typed tags.
    cmd("tag.set", -3, W, ONE, tags::set, "Sets a value with typed tags (and an expiry)."),
    cmd("tag.add", -4, WF, ONE, tags::add, "Adds typed tags to a record."),
    cmd("tag.rem", -4, WF, ONE, tags::rem, "Removes typed tags from a record."),
    cmd("tag.of", 2, RF, ONE, tags::of, "Returns a record's typed tags."),
    cmd("tag.get", -4, R, NONE, tags::get, "Returns the keys and values of a tag group."),
    cmd("tag.keys", -4, R, NONE, tags::keys, "Returns the keys of a tag group."),
    cmd("tag.count", -4, RF, NONE, tags::count, "Counts the records of a tag group."),
    cmd("tag.del", -4, W, NONE, tags::del, "Removes every record of a tag group at once."),
    // SQL tables (the engine runs them on its own threads).
    cmd("sql.exec", -2, WRITE | DEFERRED, NONE, sql::exec, "Runs SQL statements (DDL and writes) with ? parameters; replies rows changed."),
    cmd("sql.query", -2, READONLY | DEFERRED, NONE, sql::query, "Runs one SQL query with ? parameters; replies [columns, rows]."),
    cmd("sql.expire", -2, WRITE | DEFERRED, NONE, sql::expire, "Sets or shows a table's expiry rules (AGE, ROWS, OPS)."),
    cmd("sql.tables", 1, READONLY | DEFERRED, NONE, sql::tables, "Lists the SQL tables."),
    cmd("sql.describe", 2, READONLY | DEFERRED, NONE, sql::describe, "Describes an SQL table's columns."),
    // Write-behind to databases (docs/writebehind.md).
    cmd("wb.info", -1, ADMIN, NONE, wb::info, "Shows write-behind mappings: settings, queue, bytes, oldest age, rows written, retries, dead letters."),
    cmd("wb.add", -4, ADMIN, NONE, wb::add, "Adds a write-behind mapping: WB.ADD name key value [key value ...]."),
    cmd("wb.del", 2, ADMIN, NONE, wb::del, "Removes a write-behind mapping (its log stays on disk)."),
    cmd("wb.dlq", -3, ADMIN, NONE, wb::dlq, "A write-behind mapping's dead-letter list: WB.DLQ name LIST [count] | DROP [lsn ...] | RETRY [lsn ...]."),
];

/// Internal entries for the memcached verbs that have no RESP command (memcached requests
/// otherwise count as the RESP command they map onto, see `crate::memcached::verbs`). They
/// exist for INFO commandstats: RESP's `lookup` and COMMAND never see them.
#[rustfmt::skip]
pub static MEMCACHED_ONLY: &[Command] = &[
    cmd("gat", -3, W, NONE, memcached_only, "memcached: reads keys and sets their expiry (gat, gats)."),
    cmd("cas", -6, W, NONE, memcached_only, "memcached: stores a value if its CAS is unchanged."),
    cmd("prepend", -5, W, NONE, memcached_only, "memcached: prepends to a value."),
    cmd("version", 1, FAST, NONE, memcached_only, "memcached: the server's version."),
    cmd("verbosity", -2, FAST, NONE, memcached_only, "memcached: sets the log verbosity."),
    cmd("cache_memlimit", -2, ADMIN, NONE, memcached_only, "memcached: sets the memory limit."),
    cmd("stats", -1, 0, NONE, memcached_only, "memcached: statistics."),
    cmd("mg", -2, R, NONE, memcached_only, "memcached meta get."),
    cmd("ms", -3, W, NONE, memcached_only, "memcached meta set."),
    cmd("md", -2, W, NONE, memcached_only, "memcached meta delete."),
    cmd("ma", -2, W, NONE, memcached_only, "memcached meta arithmetic."),
    cmd("mn", 1, FAST, NONE, memcached_only, "memcached meta no-op."),
    cmd("me", 2, R, NONE, memcached_only, "memcached meta debug."),
];

fn memcached_only(ctx: &mut super::Ctx<'_, '_>) {
    ctx.err(b"ERR a memcached verb, not a RESP command")
}

/// A memcached-only entry by name.
pub fn memcached_only_entry(name: &str) -> &'static Command {
    MEMCACHED_ONLY
        .iter()
        .find(|c| c.name == name)
        .expect("memcached-only entry exists")
}

/// commandstats counts each entry in its own slot: its position in the table, then in the
/// memcached-only entries.
impl crate::stats::Counted for Command {
    fn slot(&'static self) -> usize {
        let offset = |table: &[Command]| {
            (self as *const Command as usize)
                .checked_sub(table.as_ptr() as usize)
                .map(|bytes| bytes / std::mem::size_of::<Command>())
                .filter(|&i| i < table.len())
        };
        offset(COMMANDS)
            .or_else(|| offset(MEMCACHED_ONLY).map(|i| COMMANDS.len() + i))
            .expect("a command of the table")
    }
}

/// The entry counted in commandstats `slot` (see `crate::stats::Counted`).
pub fn by_slot(slot: usize) -> Option<&'static Command> {
    COMMANDS
        .get(slot)
        .or_else(|| MEMCACHED_ONLY.get(slot.checked_sub(COMMANDS.len())?))
}

/// Finds a command by name, case-insensitively, without allocating.
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    // ahash rather than the default SipHash: every request looks its command up, and SipHash
    // of the name cost more than the rest of a GET's command path (callgrind).
    type Index = HashMap<&'static [u8], usize, ahash::RandomState>;
    static INDEX: OnceLock<Index> = OnceLock::new();
    let index = INDEX.get_or_init(|| {
        COMMANDS
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_bytes(), i))
            .collect()
    });
    let mut lowered = [0u8; 16];
    let name_lower = lowered.get_mut(..name.len())?;
    for (dst, src) in name_lower.iter_mut().zip(name) {
        *dst = src.to_ascii_lowercase();
    }
    index.get(&*name_lower).map(|&i| &COMMANDS[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_has_its_own_stats_slot() {
        use crate::stats::Counted;
        assert!(COMMANDS.len() + MEMCACHED_ONLY.len() <= crate::stats::SLOTS);
        for (i, c) in COMMANDS.iter().chain(MEMCACHED_ONLY).enumerate() {
            assert_eq!(c.slot(), i);
            assert!(std::ptr::eq(by_slot(i).unwrap(), c));
        }
        assert!(by_slot(COMMANDS.len() + MEMCACHED_ONLY.len()).is_none());
    }

    #[test]
    fn lookup_is_case_insensitive() {
        assert_eq!(lookup(b"GeT").unwrap().name, "get");
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(b"averyveryverylongname").is_none());
    }

    #[test]
    fn key_positions_follow_the_spec() {
        let mset = lookup(b"mset").unwrap();
        assert_eq!(mset.key_positions(5).collect::<Vec<_>>(), vec![1, 3]);
        let del = lookup(b"del").unwrap();
        assert_eq!(del.key_positions(4).collect::<Vec<_>>(), vec![1, 2, 3]);
        let ping = lookup(b"ping").unwrap();
        assert_eq!(ping.key_positions(2).count(), 0);
    }

    #[test]
    fn names_are_unique_and_lowercase() {
        let mut names: Vec<_> = COMMANDS.iter().map(|c| c.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), COMMANDS.len());
        assert!(COMMANDS
            .iter()
            .all(|c| c.name == c.name.to_ascii_lowercase()));
        // memcached-only entries do not shadow RESP commands (they share INFO's namespace).
        assert!(MEMCACHED_ONLY
            .iter()
            .all(|c| lookup(c.name.as_bytes()).is_none()));
    }
}
