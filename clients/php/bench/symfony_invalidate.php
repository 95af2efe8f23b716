<?php
// Invalidating one tag of N items: this adapter (one TAG.DEL) against Symfony's own
// RedisTagAwareAdapter (tag sets), on the same server, the same phpredis connection. Prints the
// median time of commit() (N deferred saves) and of invalidateTags(['page.5']) over 20 runs, and
// the commands the invalidation ran (INFO commandstats). FLUSHALLs the server: use a scratch one.
//
// Usage: php clients/php/bench/symfony_invalidate.php PORT N
//   (RedisTagAwareAdapter needs --maxmemory-policy noeviction or volatile-*)
require_once 'Symfony/Component/Cache/autoload.php';
require __DIR__ . '/../autoload.php';

use Cairn\Cache\Symfony\CairnTagAwareAdapter;
use Cairn\Cache\TagRegistry;
use Symfony\Component\Cache\Adapter\RedisTagAwareAdapter;

[$port, $n, $reps] = [(int)$argv[1], (int)$argv[2], 20];
$r = new Redis();
$r->connect('127.0.0.1', $port);
$pools = [
    'cairn' => new CairnTagAwareAdapter($r, 'c', 600, new TagRegistry(['page' => 1], '.')),
    'symfony-redis' => new RedisTagAwareAdapter($r, 's', 600),
];
foreach ($pools as $name => $pool) {
  $save = $inv = [];
  for ($rep = 0; $rep < $reps; $rep++) {
    $r->flushAll();
    $items = $pool->getItems(array_map(fn($i) => "frag$i", range(1, $n)));
    $t = hrtime(true);
    foreach ($items as $item) {
      $pool->saveDeferred($item->set(str_repeat('x', 200))->tag(['page.5', 'user.' . random_int(1, 50)]));
    }
    $pool->commit();
    $save[] = (hrtime(true) - $t) / 1e3;
    $r->rawCommand('CONFIG', 'RESETSTAT');
    $t = hrtime(true);
    $pool->invalidateTags(['page.5']);
    $inv[] = (hrtime(true) - $t) / 1e3;
    $stats = $r->rawCommand('INFO', 'commandstats');
    if ($pool->getItem('frag1')->isHit()) { echo "not invalidated!\n"; }
  }
  sort($save); sort($inv);
  preg_match_all('/cmdstat_([^:]+):calls=(\d+)/', $stats, $m);
  $cmds = array_filter(array_combine($m[1], $m[2]), fn($k) => !in_array($k, ['config','info']), ARRAY_FILTER_USE_KEY);
  printf("%-14s N=%d  commit %8.0f us  invalidateTags %7.0f us (median of %d)  commands: %s\n", $name, $n, $save[$reps/2], $inv[$reps/2], $reps, json_encode($cmds));
}
