<?php
// clients/php's Laravel store (Cairn\Cache\Laravel\CairnStore) registered with
// Cache::extend('cairn', ...) by its service provider, used through the Cache facade as an
// application does: put/get/many/add/increment/forever/forget, expiry, Cache::tags()
// put/get/flush, Cache::lock, Cache::flush, and the page-fragment example (a page's fragments
// expired by one TAG.DEL, counted by INFO commandstats). Prints one JSON object, step name =>
// result ("error: ..." when it threw). tests/test_php_drivers.py runs it and checks every step.
//
// Usage: php tests/php/cairn_laravel.php PORT

require_once 'Illuminate/Cache/autoload.php';
require_once 'Illuminate/Config/autoload.php';
require_once 'Illuminate/Container/autoload.php';
require_once 'Illuminate/Redis/autoload.php';
require_once 'Illuminate/Support/autoload.php';
require_once __DIR__ . '/../../clients/php/autoload.php';

use Cairn\Cache\Laravel\CairnServiceProvider;
use Illuminate\Cache\CacheManager;
use Illuminate\Config\Repository as Config;
use Illuminate\Container\Container;
use Illuminate\Redis\RedisManager;
use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\Facade;

$port = (int)($argv[1] ?? 0);

// A minimal application: config, the Redis manager, the cache manager, the facade.
$app = new Container();
$app['config'] = new Config([
    'cache' => [
        'default' => 'cairn',
        'prefix' => 'app',
        'stores' => [
            'cairn' => ['driver' => 'cairn', 'host' => '127.0.0.1', 'port' => $port, 'timeout' => 5,
                        'read_timeout' => 5, 'tag_kinds' => ['page' => 1, 'user' => 2]],
            // the same server through a connection of Laravel's Redis manager, another prefix
            'other' => ['driver' => 'cairn', 'connection' => 'cache', 'prefix' => 'other'],
        ],
    ],
]);
// Like config/database.php's default: the connection prefixes keys (phpredis OPT_PREFIX),
// here with a serializer too; the store's raw commands must honour the one, ignore the other.
$app['redis'] = new RedisManager($app, 'phpredis', [
    'cache' => ['host' => '127.0.0.1', 'port' => $port, 'database' => 0, 'read_timeout' => 5,
                'prefix' => 'laravel_database_', 'serializer' => Redis::SERIALIZER_PHP],
]);
$app['cache'] = new CacheManager($app);
Facade::setFacadeApplication($app);
(new CairnServiceProvider($app))->boot();

$side = new Redis();   // the test's own eyes: raw commands on a second connection
$side->connect('127.0.0.1', $port, 5.0);

$out = [];
function step(string $name, callable $f) {
    global $out;
    try {
        $out[$name] = $f();
    } catch (Throwable $e) {
        $out[$name] = 'error: ' . get_class($e) . ': ' . $e->getMessage();
    }
}
/** INFO commandstats as name => calls, leaving out the test's own CONFIG and INFO. */
function commandstats(Redis $side): array {
    $calls = [];
    foreach (explode("\n", $side->rawCommand('INFO', 'commandstats')) as $line) {
        if (preg_match('/^cmdstat_([^:]+):calls=(\d+)/', trim($line), $m) && !in_array($m[1], ['config', 'info'], true)) {
            $calls[$m[1]] = (int)$m[2];
        }
    }
    return $calls;
}

step('store_class', fn() => get_class(Cache::getStore()));
step('put', fn() => Cache::put('user:1', ['name' => 'Ada'], 60));
step('get', fn() => Cache::get('user:1'));
step('stored_as', fn() => [$side->pttl('app:user:1') > 59000, $side->rawCommand('TAG.OF', 'app:user:1')]);
step('get_missing', fn() => Cache::get('nope', 'default'));
step('add', fn() => [Cache::add('once', 'first', 60), Cache::add('once', 'second', 60), Cache::get('once')]);
step('increment', fn() => [Cache::increment('hits'), Cache::increment('hits', 5), Cache::decrement('hits'), Cache::get('hits')]);
step('put_many', fn() => [Cache::putMany(['a' => 1, 'b' => 'two'], 60), Cache::many(['a', 'b', 'c'])]);
step('remember', fn() => [Cache::remember('computed', 60, fn() => 'fresh'), Cache::remember('computed', 60, fn() => 'again')]);
step('forever_forget', fn() => [Cache::forever('f', 'x'), $side->pttl('app:f'), Cache::forget('f'), Cache::has('f'), Cache::forget('f')]);
step('expiry', function () use ($side) {
    Cache::put('short', 'soon gone', 1);
    $pttl = $side->pttl('app:short');
    $before = Cache::get('short');
    usleep(1100000);
    return [$pttl > 0 && $pttl <= 1000, $before, Cache::get('short')];
});

// --- tags ---
step('tags_put', fn() => [
    Cache::tags(['people', 'authors'])->put('john', 'John', 60),
    Cache::tags(['people'])->put('anne', 'Anne', 60),
    Cache::tags(['authors'])->put('john', 'John the author', 60),
]);
step('tags_get', fn() => [
    Cache::tags(['people', 'authors'])->get('john'),
    Cache::tags(['authors'])->get('john'),     // another tag list: another item, as in Laravel
    Cache::get('john'),                         // untagged: not the tagged items
    Cache::tags(['people'])->get('anne'),
]);
step('tags_flush', fn() => [
    Cache::tags(['authors'])->flush(),          // every item tagged "authors", under any list
    Cache::tags(['people', 'authors'])->get('john'),
    Cache::tags(['authors'])->get('john'),
    Cache::tags(['people'])->get('anne'),
]);
step('tags_none_flush', fn() => [Cache::tags([])->flush(), Cache::tags(['people'])->get('anne'), Cache::get('once')]);
step('tags_add_increment', function () {
    $t = Cache::tags(['stats']);
    $r = [$t->add('visits_since', 'monday', 60), $t->add('visits_since', 'tuesday', 60), $t->increment('visits'), $t->increment('visits', 2)];
    $t->flush();                                 // the counter created by increment goes too
    return [...$r, $t->get('visits_since'), $t->get('visits')];
});
step('tags_many', function () {
    Cache::tags(['m'])->putMany(['k1' => 'v1', 'k2' => 'v2'], 60);
    return Cache::tags(['m'])->many(['k1', 'k2', 'k3']);
});

// --- locks ---
step('lock', function () use ($side) {
    $lock = Cache::lock('job', 10);
    $got = $lock->get();
    $pttl = $side->pttl('app:job');
    $second = Cache::lock('job', 10)->get();
    $notMine = Cache::restoreLock('job', 'someone else')->release();
    $released = $lock->release();
    $again = Cache::lock('job', 10);
    return [$got, $pttl > 9000 && $pttl <= 10000, $second, $notMine, $released, $again->get(), $again->release()];
});
step('lock_restore_block', function () {
    $lock = Cache::lock('report', 5);
    $lock->get();
    $owner = $lock->owner();
    $restored = Cache::restoreLock('report', $owner)->release();   // another process releases it
    $blocked = Cache::lock('report', 5)->block(1, fn() => 'ran');
    return [$restored, $blocked];
});

// --- a store on a Laravel Redis connection with OPT_PREFIX and a serializer ---
step('connection_prefix', function () use ($side) {
    $other = Cache::store('other');
    $r = [$other->put('k', ['v'], 60), $other->get('k'), $other->add('k', 'no', 60), $other->increment('n', 2),
          $other->tags(['people'])->put('t', 'tagged', 60), $other->tags(['people'])->get('t'),
          $side->exists('laravel_database_other:k'), $side->rawCommand('TAG.OF', 'laravel_database_other:k')];
    $lock = $other->lock('job', 10);
    $r[] = [$lock->get(), $side->exists('laravel_database_other:job'), $lock->release()];
    $r[] = $other->forget('k');
    $r[] = $other->many(['k', 'n']);
    return $r;
});

// --- Cache::flush(): this prefix's records only; locks and other prefixes stay ---
step('flush', function () use ($side) {
    Cache::put('mine', 1, 60);
    Cache::store('other')->put('theirs', 2, 60);
    $side->set('app:raw', 'not written by the store');
    $lock = Cache::lock('held', 30);
    $lock->get();
    $side->rawCommand('CONFIG', 'RESETSTAT');
    $ok = Cache::flush();
    $stats = commandstats($side);
    return [$ok, $stats, Cache::get('mine'), Cache::get('hits'), Cache::store('other')->get('theirs'),
            $side->exists('app:raw'), Cache::lock('held', 30)->get(), $lock->release()];
});

// --- the page-fragment example: page 5's fragments expire with one TAG.DEL ---
step('fragments', function () use ($side) {
    Cache::tags(['page:5'])->put('header', '<header>..</header>', 3600);
    Cache::tags(['page:5', 'user:42'])->put('sidebar', '<aside>..</aside>', 600);
    Cache::tags(['page:7', 'user:42'])->put('inbox', '<div>..</div>', 600);
    $before = (int)$side->rawCommand('TAG.COUNT', 'WHERE', '1', '=', '5');
    $side->rawCommand('CONFIG', 'RESETSTAT');
    $ok = Cache::tags(['page:5'])->flush();      // page 5 was edited
    $stats = commandstats($side);
    return [$before, $ok, $stats, Cache::tags(['page:5'])->get('header'),
            Cache::tags(['page:5', 'user:42'])->get('sidebar'), Cache::tags(['page:7', 'user:42'])->get('inbox')];
});

// a hashed name's records, left for the test to find by the documented rule
step('hashed', fn() => Cache::tags(['newsletter'])->put('issue', 'n', 60));

echo json_encode($out), "\n";
