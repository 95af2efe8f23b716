<?php
// Flushing one tag of N items: this store (one TAG.DEL) against Laravel's own RedisStore (tag
// sets), on the same server. Prints the median time of the N tagged puts and of
// Cache::tags(['page:5'])->flush() over 20 runs, and the commands the flush ran (INFO
// commandstats). FLUSHALLs the server: use a scratch one.
//
// Usage: php clients/php/bench/laravel_flush.php PORT N
foreach (['Cache', 'Config', 'Container', 'Support', 'Redis'] as $part) {
    require_once "Illuminate/$part/autoload.php";
}
require __DIR__ . '/../autoload.php';

use Cairn\Cache\Laravel\CairnStore;
use Cairn\Cache\TagRegistry;
use Illuminate\Cache\RedisStore;
use Illuminate\Cache\Repository;
use Illuminate\Redis\RedisManager;

[$port, $n, $reps] = [(int)$argv[1], (int)$argv[2], 20];
$r = new Redis();
$r->connect('127.0.0.1', $port);
$mgr = new RedisManager(null, 'phpredis', ['default' => ['host' => '127.0.0.1', 'port' => $port, 'database' => 0]]);
$stores = [
    'cairn' => new Repository(new CairnStore($r, 'c', new TagRegistry(['page' => 1]))),
    'laravel-redis' => new Repository(new RedisStore($mgr, 'l', 'default')),
];
foreach ($stores as $name => $cache) {
  $put = $fl = [];
  for ($rep = 0; $rep < $reps; $rep++) {
    $r->flushAll();
    $t = hrtime(true);
    for ($i = 0; $i < $n; $i++) { $cache->tags(['page:5', 'user:' . ($i % 50)])->put("frag$i", str_repeat('x', 200), 600); }
    $put[] = (hrtime(true) - $t) / 1e3;
    $r->rawCommand('CONFIG', 'RESETSTAT');
    $t = hrtime(true);
    $cache->tags(['page:5'])->flush();
    $fl[] = (hrtime(true) - $t) / 1e3;
    $stats = $r->rawCommand('INFO', 'commandstats');
    if ($cache->tags(['page:5', 'user:0'])->get('frag0') !== null) echo "not flushed!\n";
  }
  sort($put); sort($fl);
  preg_match_all('/cmdstat_([^:]+):calls=(\d+)/', $stats, $m);
  $cmds = array_filter(array_combine($m[1], $m[2]), fn($k) => !in_array($k, ['config','info']), ARRAY_FILTER_USE_KEY);
  printf("%-14s N=%d  puts %8.0f us  tags(['page:5'])->flush() %7.0f us (median of %d)  commands: %s\n", $name, $n, $put[$reps/2], $fl[$reps/2], $reps, json_encode($cmds));
}
