<?php
// clients/php's Symfony adapter (Cairn\Cache\Symfony\CairnTagAwareAdapter) as an application
// uses it: PSR-6 items with expiry and tags, deferred saves, the contracts' get() with a
// callback, PSR-16 through Symfony's Psr16Cache, clear() of one namespace, and the
// page-fragment example (a page's fragments expired by one TAG.DEL, counted by INFO
// commandstats). Prints one JSON object, step name => result ("error: ..." when it threw).
// tests/test_php_drivers.py runs it and checks every step.
//
// Usage: php tests/php/cairn_symfony.php PORT

require_once 'Symfony/Component/Cache/autoload.php';
require_once 'Psr/SimpleCache/autoload.php';
require_once __DIR__ . '/../../clients/php/autoload.php';

use Cairn\Cache\Symfony\CairnTagAwareAdapter;
use Cairn\Cache\TagRegistry;
use Symfony\Component\Cache\Psr16Cache;
use Symfony\Contracts\Cache\ItemInterface;

require_once __DIR__ . '/collect_logger.php';

$port = (int)($argv[1] ?? 0);
$redis = new Redis();
$redis->connect('127.0.0.1', $port, 5.0);
$side = new Redis();   // the test's own eyes: raw commands on a second connection
$side->connect('127.0.0.1', $port, 5.0);
$log = new Collect();

// Tag kinds: "page.5" is (1, 5), "user.42" is (2, 42); other names are hashed. Symfony reserves
// ':' in tags, hence '.' as the separator.
$kinds = new TagRegistry(['page' => 1, 'user' => 2], '.');
$cache = new CairnTagAwareAdapter($redis, 'app', 0, $kinds);
$cache->setLogger($log);

$out = [];
function step(string $name, callable $f) {
    global $out;
    try {
        $out[$name] = $f();
    } catch (Throwable $e) {
        $out[$name] = 'error: ' . get_class($e) . ': ' . $e->getMessage();
    }
}
function save($cache, string $key, $value, array $tags = [], $ttl = null): bool {
    $item = $cache->getItem($key);
    $item->set($value)->tag($tags);
    if ($ttl !== null) {
        $item->expiresAfter($ttl);
    }
    return $cache->save($item);
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

// --- PSR-6 items ---
step('save_get', fn() => [save($cache, 'user.1', ['name' => 'Ada']), $cache->getItem('user.1')->isHit(), $cache->getItem('user.1')->get()]);
step('miss', fn() => [$cache->getItem('nope')->isHit(), $cache->getItem('nope')->get()]);
step('stored_as', fn() => [$side->exists('app:user.1'), $side->rawCommand('TAG.OF', 'app:user.1')]);
step('get_items', fn() => array_map(fn($i) => [$i->getKey(), $i->isHit()], array_values(iterator_to_array((function () use ($cache) { yield from $cache->getItems(['user.1', 'nope']); })()))));
step('delete', fn() => [$cache->deleteItem('user.1'), $cache->hasItem('user.1')]);
step('bad_key', fn() => $cache->getItem('a:b'));

// --- expiry ---
step('expiry', function () use ($cache, $side) {
    $item = $cache->getItem('short');
    $item->set('soon gone')->expiresAt(DateTime::createFromFormat('U.u', sprintf('%.6F', microtime(true) + 0.3)));
    $cache->save($item);
    $pttl = $side->pttl('app:short');
    $before = $cache->getItem('short')->isHit();
    usleep(450000);
    return [$pttl > 0 && $pttl <= 300, $before, $cache->getItem('short')->isHit()];
});
step('default_lifetime', function () use ($redis, $side) {
    $pool = new CairnTagAwareAdapter($redis, 'dl', 60);
    $pool->save($pool->getItem('k')->set(1));
    $pttl = $side->pttl('dl:k');
    return $pttl > 59000 && $pttl <= 60000;
});
step('saved_expired', function () use ($cache) {
    save($cache, 'gone', 'x');
    $item = $cache->getItem('gone')->set('y')->expiresAt(new DateTime('-1 minute'));
    return [$cache->save($item), $cache->hasItem('gone')];
});

// --- tags across items ---
step('tag_save', fn() => [
    save($cache, 'post1', 'p1', ['posts', 'user.7']),
    save($cache, 'post2', 'p2', ['posts']),
    save($cache, 'profile', 'pr', ['user.7']),
    save($cache, 'other', 'o', ['page.3']),
]);
step('invalidate_one', fn() => [$cache->invalidateTags(['user.7']),
    array_map(fn($k) => $cache->hasItem($k), ['post1', 'post2', 'profile', 'other'])]);
step('invalidate_many', function () use ($cache, $side) {
    $side->rawCommand('CONFIG', 'RESETSTAT');
    $ok = $cache->invalidateTags(['posts', 'page.3', 'never.used']);   // one MULTI/EXEC
    return [$ok, commandstats($side), array_map(fn($k) => $cache->hasItem($k), ['post2', 'other'])];
});
step('bad_tag', fn() => $cache->invalidateTags(['a:b']));
step('too_many_tags', fn() => save($cache, 'crowded', 1, array_map(fn($i) => "t$i", range(1, 16))));

// --- deferred saves ---
step('deferred', function () use ($cache, $side) {
    $cache->saveDeferred($cache->getItem('d1')->set(1)->tag('batch'));
    $cache->saveDeferred($cache->getItem('d2')->set(2)->tag('batch'));
    $cache->saveDeferred($cache->getItem('d3')->set(3));
    $before = $side->exists('app:d1', 'app:d2', 'app:d3');
    $other = $cache->hasItem('d9');            // another key: nothing committed yet
    $still = $side->exists('app:d1', 'app:d2', 'app:d3');
    $seen = $cache->getItem('d2')->get();      // reading a deferred item commits them first
    return [$before, $other, $still, $seen, $side->exists('app:d1', 'app:d2', 'app:d3')];
});
step('deferred_invalidate', function () use ($cache) {
    $cache->saveDeferred($cache->getItem('d4')->set(4)->tag('batch'));
    $cache->invalidateTags(['batch']);         // commits d4 first, then expires it with d1, d2
    return array_map(fn($k) => $cache->hasItem($k), ['d1', 'd2', 'd3', 'd4']);
});
step('commit', function () use ($cache, $side) {
    foreach (range(1, 5) as $i) {
        $cache->saveDeferred($cache->getItem("c$i")->set($i)->tag('page.9'));
    }
    $side->rawCommand('CONFIG', 'RESETSTAT');
    $ok = $cache->commit();
    return [$ok, commandstats($side), (int)$side->rawCommand('TAG.COUNT', 'WHERE', '1', '=', '9')];
});

// --- Symfony's contracts: get() with a callback ---
step('contracts_get', function () use ($cache) {
    $calls = 0;
    $compute = function (ItemInterface $item) use (&$calls) {
        $calls++;
        $item->tag(['page.11'])->expiresAfter(60);
        return "rendered $calls";
    };
    $a = $cache->get('rendered', $compute);
    $b = $cache->get('rendered', $compute);
    $cache->invalidateTags(['page.11']);
    $c = $cache->get('rendered', $compute);
    return [$a, $b, $c, $calls];
});

// --- PSR-16 through Symfony's Psr16Cache ---
step('psr16', function () use ($cache, $side) {
    $simple = new Psr16Cache($cache);
    return [
        $simple->set('s1', 'one', 100),
        $simple->get('s1'),
        $side->pttl('app:s1') > 99000,
        $simple->setMultiple(['s2' => 2, 's3' => [3]]),
        $simple->getMultiple(['s1', 's2', 's3', 's4'], 'dflt'),
        $simple->deleteMultiple(['s2']),
        $simple->has('s2'),
        $simple->set('s5', 'x', 0),   // ttl 0: expired at once, so not stored
        $simple->has('s5'),
    ];
});

// --- clear(): the namespace's items only ---
step('clear', function () use ($cache, $redis, $side) {
    $neighbour = new CairnTagAwareAdapter($redis, 'neighbour');
    save($neighbour, 'n', 'kept');
    save($cache, 'x', 1);
    $side->set('app:raw', 'not written by the adapter');
    $side->rawCommand('CONFIG', 'RESETSTAT');
    $ok = $cache->clear();
    return [$ok, commandstats($side), $cache->hasItem('x'), $cache->hasItem('s1'), $neighbour->getItem('n')->get(), $side->exists('app:raw')];
});
step('clear_prefix', function () use ($cache) {
    save($cache, 'p.a', 1);
    save($cache, 'p.b', 2);
    save($cache, 'q', 3);
    return [$cache->clear('p.'), $cache->hasItem('p.a'), $cache->hasItem('p.b'), $cache->hasItem('q')];
});

// --- a connection with phpredis's OPT_PREFIX and a serializer: keys get the prefix, values
// are the adapter's own ---
step('connection_prefix', function () use ($port, $side, $kinds) {
    $prefixed = new Redis();
    $prefixed->connect('127.0.0.1', $port, 5.0);
    $prefixed->setOption(Redis::OPT_PREFIX, 'pfx_');
    $prefixed->setOption(Redis::OPT_SERIALIZER, Redis::SERIALIZER_PHP);
    $pool = new CairnTagAwareAdapter($prefixed, 'ns', 0, $kinds);
    return [save($pool, 'k', 'v', ['page.5']), $side->exists('pfx_ns:k'), $side->rawCommand('TAG.OF', 'pfx_ns:k'),
            $pool->getItem('k')->get(), $pool->clear(), $pool->hasItem('k')];
});

// --- the page-fragment example: page 5's fragments expire with one TAG.DEL ---
step('fragments', function () use ($cache, $side) {
    save($cache, 'frag.header', '<header>..</header>', ['page.5'], 3600);
    save($cache, 'frag.p5.u42.sidebar', '<aside>..</aside>', ['page.5', 'user.42'], 600);
    save($cache, 'frag.p7.u42.inbox', '<div>..</div>', ['page.7', 'user.42']);
    $before = (int)$side->rawCommand('TAG.COUNT', 'WHERE', '1', '=', '5');
    $side->rawCommand('CONFIG', 'RESETSTAT');
    $ok = $cache->invalidateTags(['page.5']);   // page 5 was edited
    $stats = commandstats($side);
    return [$before, $ok, $stats, array_map(fn($k) => $cache->hasItem($k), ['frag.header', 'frag.p5.u42.sidebar', 'frag.p7.u42.inbox'])];
});
$out['log'] = $log->lines;

echo json_encode($out), "\n";
