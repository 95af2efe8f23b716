<?php
// Symfony's RedisAdapter (mode "plain": save, get, delete) or RedisTagAwareAdapter (mode
// "tagged": save with tags, get, invalidateTags) over phpredis. Prints one JSON object, step
// name => result ("error: ..." when a step threw, and the adapter's logged warnings under "log").
// tests/test_frameworks_php.py runs it and checks every step.
//
// Usage: php tests/php/symfony_cache.php PORT plain|tagged

require_once 'Symfony/Component/Cache/autoload.php';

use Symfony\Component\Cache\Adapter\RedisAdapter;
use Symfony\Component\Cache\Adapter\RedisTagAwareAdapter;

require_once __DIR__ . '/collect_logger.php';

$port = (int)($argv[1] ?? 0);
$redis = new Redis();
$redis->connect('127.0.0.1', $port, 5.0);
$log = new Collect();

$out = [];
function step(string $name, callable $f) {
    global $out;
    try {
        $out[$name] = $f();
    } catch (Throwable $e) {
        $out[$name] = 'error: ' . get_class($e) . ': ' . $e->getMessage();
    }
}

$mode = $argv[2] ?? 'plain';
if ($mode === 'plain') {
$plain = new RedisAdapter($redis, 'plain', 60);
$plain->setLogger($log);
step('plain_save', function () use ($plain) {
    $item = $plain->getItem('answer');
    $item->set(42);
    return $plain->save($item);
});
step('plain_get', fn() => [$plain->getItem('answer')->isHit(), $plain->getItem('answer')->get()]);
step('plain_delete', fn() => [$plain->deleteItem('answer'), $plain->getItem('answer')->isHit()]);
} else {
$tagged = new RedisTagAwareAdapter($redis, 'tagged', 60);
$tagged->setLogger($log);
step('tag_save', function () use ($tagged) {
    $saved = [];
    foreach (['post1' => ['posts', 'user7'], 'post2' => ['posts'], 'profile' => ['user7']] as $key => $tags) {
        $item = $tagged->getItem($key);
        $item->set("value of $key")->tag($tags);
        $saved[] = $tagged->save($item);
    }
    return $saved;
});
step('tag_get', fn() => array_map(fn($k) => $tagged->getItem($k)->get(), ['post1', 'post2', 'profile']));
step('invalidate', fn() => $tagged->invalidateTags(['user7']));
step('after_invalidate', fn() => array_map(fn($k) => $tagged->getItem($k)->isHit(), ['post1', 'post2', 'profile']));
}
$out['log'] = $log->lines;

echo json_encode($out), "\n";
