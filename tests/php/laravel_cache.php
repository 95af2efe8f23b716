<?php
// Laravel's cache (Illuminate\Cache\Repository over its RedisStore, phpredis connector), as an
// application uses it: put/get/add/increment/many/remember/tags/flush/lock. Prints one JSON
// object, step name => result ("error: ..." when the step threw).
// tests/test_frameworks_php.py::test_laravel_cache runs it and checks every step.
//
// Usage: php tests/php/laravel_cache.php PORT

require_once 'Illuminate/Cache/autoload.php';
require_once 'Illuminate/Redis/autoload.php';

use Illuminate\Cache\RedisStore;
use Illuminate\Cache\Repository;
use Illuminate\Redis\RedisManager;

$port = (int)($argv[1] ?? 0);
$redis = new RedisManager(null, 'phpredis', [
    'default' => ['host' => '127.0.0.1', 'port' => $port, 'database' => 0, 'read_timeout' => 5],
]);
$cache = new Repository(new RedisStore($redis, 'app:', 'default'));

$out = [];
function step(string $name, callable $f) {
    global $out;
    try {
        $out[$name] = $f();
    } catch (Throwable $e) {
        $out[$name] = 'error: ' . get_class($e) . ': ' . $e->getMessage();
    }
}

step('put', fn() => $cache->put('user:1', ['name' => 'Ada'], 60));
step('get', fn() => $cache->get('user:1'));
step('get_missing', fn() => $cache->get('nope', 'default'));
step('add_new', fn() => $cache->add('once', 'first', 60));
step('add_existing', fn() => $cache->add('once', 'second', 60));
step('add_value', fn() => $cache->get('once'));
step('increment', fn() => [$cache->increment('hits'), $cache->increment('hits', 5), $cache->decrement('hits')]);
step('put_many', fn() => $cache->putMany(['a' => 1, 'b' => 2], 60));
step('many', fn() => $cache->many(['a', 'b', 'c']));
step('remember', fn() => [
    $cache->remember('computed', 60, fn() => 'fresh'),
    $cache->remember('computed', 60, fn() => 'recomputed'),
]);
step('forever_forget', fn() => [$cache->forever('f', 'x'), $cache->forget('f'), $cache->has('f')]);
step('tags_put', fn() => $cache->tags(['people', 'authors'])->put('john', 'John', 60));
step('tags_get', fn() => $cache->tags(['people', 'authors'])->get('john'));
step('tags_flush', fn() => $cache->tags(['authors'])->flush());
step('tags_after_flush', fn() => $cache->tags(['people', 'authors'])->get('john'));
step('lock', function () use ($cache) {
    $lock = $cache->lock('job', 10);
    $got = $lock->get();
    $second = $cache->lock('job', 10)->get();
    $released = $lock->release();
    $again = $cache->lock('job', 10);
    return [$got, $second, $released, $again->get(), $again->release()];
});
step('flush', fn() => [$cache->flush(), $cache->get('user:1')]);

echo json_encode($out), "\n";
