<?php
// Drives cairn's typed-tag commands through phpredis (Redis::rawCommand) and prints one JSON
// object: step name => reply (false for an error reply, with the message under "<step>_error").
// tests/test_tags.py::test_phpredis_raw_command runs it and checks every step.
//
// Usage: php tests/php/tag_commands.php PORT [HOST]
// Tag types used: 1 = page, 2 = user (the fragment example of issue 4).

if (!extension_loaded('redis')) {
    fwrite(STDERR, "the phpredis extension (php-redis) is not loaded\n");
    exit(3);
}
$port = (int)($argv[1] ?? 0);
$host = $argv[2] ?? '127.0.0.1';
if ($port <= 0) {
    fwrite(STDERR, "usage: php tag_commands.php PORT [HOST]\n");
    exit(2);
}

$r = new Redis();
$r->connect($host, $port, 5.0);
$r->setOption(Redis::OPT_READ_TIMEOUT, 10);

$out = [];
function step(string $name, $reply) {
    global $out, $r;
    $out[$name] = $reply;
    if ($reply === false) {
        $out[$name . '_error'] = $r->getLastError();
        $r->clearLastError();
    }
}

step('flush', $r->rawCommand('FLUSHALL'));
// fragments of page 5 (users 42 and 43) and page 6 (user 42)
step('set1', $r->rawCommand('TAG.SET', 'frag:1', '<p>one</p>', 'TAG', '1', '5', 'TAG', '2', '42'));
step('set2', $r->rawCommand('TAG.SET', 'frag:2', '<p>two</p>', 'TAG', '1', '5', 'TAG', '2', '43'));
step('set3', $r->rawCommand('TAG.SET', 'frag:3', '<p>three</p>', 'EX', '100', 'TAG', '1', '6', 'TAG', '2', '42'));
step('add', $r->rawCommand('TAG.ADD', 'frag:3', '3', '-7', '3', '9223372036854775807'));
step('of', $r->rawCommand('TAG.OF', 'frag:3'));
step('rem', $r->rawCommand('TAG.REM', 'frag:3', '3', '-7'));
step('get_page', $r->rawCommand('TAG.GET', 'WHERE', '1', '=', '5'));
step('get_and', $r->rawCommand('TAG.GET', 'WHERE', '1', '=', '5', 'AND', '2', '=', '42'));
step('keys_range', $r->rawCommand('TAG.KEYS', 'WHERE', '1', 'BETWEEN', '5', '6', 'LIMIT', '2'));
step('count_user', $r->rawCommand('TAG.COUNT', 'WHERE', '2', '=', '42'));
step('count_ge', $r->rawCommand('TAG.COUNT', 'WHERE', '1', '>=', '6'));
step('bad_query', $r->rawCommand('TAG.GET', 'WHERE', '1', 'bogus', '5'));
step('ping_after_error', $r->rawCommand('PING'));
step('del_user', $r->rawCommand('TAG.DEL', 'WHERE', '2', '=', '42'));
step('keys_left', $r->rawCommand('TAG.KEYS', 'WHERE', '1', 'ANY'));
step('dbsize', $r->rawCommand('DBSIZE'));

echo json_encode($out), "\n";
