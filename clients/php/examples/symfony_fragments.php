<?php
// The page-fragment example with Symfony's cache contracts on cairn typed tags: page 5 is
// rendered from cached fragments, edited (its fragments expire with one TAG.DEL), and rendered
// again; user 42's fragments on other pages are untouched.
//
// Usage: php clients/php/examples/symfony_fragments.php [PORT]   (a cairn server, default 6380)
// Needs Symfony's cache (Composer's vendor/autoload.php, or Debian's php-symfony-cache).

declare(strict_types=1);

if (is_file(__DIR__ . '/../vendor/autoload.php')) {
    require __DIR__ . '/../vendor/autoload.php';
} else {
    require_once 'Symfony/Component/Cache/autoload.php';
    require __DIR__ . '/../autoload.php';
}

use Cairn\Cache\Symfony\CairnTagAwareAdapter;
use Cairn\Cache\TagRegistry;
use Symfony\Contracts\Cache\ItemInterface;

$redis = new Redis();
$redis->connect('127.0.0.1', (int)($argv[1] ?? 6380), 0.25);
$redis->setOption(Redis::OPT_READ_TIMEOUT, 0.5);

// Tag kinds: page.N is (1, N), user.N is (2, N). Symfony reserves ':' in tags.
$cache = new CairnTagAwareAdapter($redis, 'example', 3600, new TagRegistry(['page' => 1, 'user' => 2], '.'));
$cache->clear();

$renders = [];
function fragment(CairnTagAwareAdapter $cache, string $key, array $tags, int $ttl): string {
    return $cache->get($key, function (ItemInterface $item) use ($key, $tags, $ttl) {
        global $renders;
        $renders[] = $key;                          // the expensive part: templates, queries
        $item->tag($tags)->expiresAfter($ttl);
        return "<div id=\"$key\">rendered at " . date('H:i:s') . '</div>';
    });
}
function page(CairnTagAwareAdapter $cache, int $page, int $user): string {
    global $renders;
    $renders = [];
    fragment($cache, "p$page.header", ["page.$page"], 3600);
    fragment($cache, "p$page.u$user.sidebar", ["page.$page", "user.$user"], 600);
    return $renders ? 'rendered ' . implode(', ', $renders) : 'all fragments from the cache';
}

echo "page 5 for user 42: ", page($cache, 5, 42), "\n";
echo "page 7 for user 42: ", page($cache, 7, 42), "\n";
echo "page 5 for user 42: ", page($cache, 5, 42), "\n";
echo "page 5 fragments on the server: ", $redis->rawCommand('TAG.COUNT', 'WHERE', '1', '=', '5'), "\n";
$cache->invalidateTags(['page.5']);                  // page 5 was edited: one TAG.DEL WHERE 1 = 5
echo "edited page 5: invalidateTags(['page.5'])\n";
echo "page 5 fragments on the server: ", $redis->rawCommand('TAG.COUNT', 'WHERE', '1', '=', '5'), "\n";
echo "page 5 for user 42: ", page($cache, 5, 42), "\n";
echo "page 7 for user 42: ", page($cache, 7, 42), "\n";
$cache->invalidateTags(['user.42']);                 // user 42 changed settings: TAG.DEL WHERE 2 = 42
echo "user 42 changed settings: invalidateTags(['user.42'])\n";
echo "page 7 for user 42: ", page($cache, 7, 42), "\n";
