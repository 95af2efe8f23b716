<?php
// One PHP request with a Redis session (phpredis's handler, locking enabled): starts the session
// of id ARGV[2], prints when it got it (the lock), adds ARGV[3] to the session's "visits" list,
// holds it ARGV[4] seconds, then closes it (releasing the lock). Prints one JSON object.
// tests/test_frameworks_php.py::test_php_session_locking runs two of them at once.
//
// Usage: php -d session.save_handler=redis -d session.save_path=tcp://127.0.0.1:PORT
//            -d redis.session.locking_enabled=1 ... tests/php/session_lock.php PORT ID NAME HOLD

$id = $argv[2];
$name = $argv[3];
$hold = (float)$argv[4];
session_id($id);
$asked = microtime(true);
$started = session_start();
$got = microtime(true);
$_SESSION['visits'] = array_merge($_SESSION['visits'] ?? [], [$name]);
usleep((int)($hold * 1e6));
$released_at = microtime(true);
$closed = session_write_close();
echo json_encode([
    'started' => $started, 'closed' => $closed, 'asked' => $asked, 'got' => $got,
    'released' => $released_at, 'visits' => $_SESSION['visits'],
]), "\n";
