<?php
// The page-fragment example with Laravel's Cache facade on cairn typed tags: page 5 is
// rendered from cached fragments, edited (its fragments expire with one TAG.DEL), and rendered
// again; user 42's fragments on other pages are untouched. The application is the least
// Laravel needs for its cache: a container, config, the cache manager and the facade; in a
// Laravel application only the config/cache.php entry and the provider are yours.
//
// Usage: php clients/php/examples/laravel_fragments.php [PORT]   (a cairn server, default 6380)
// Needs Laravel (Composer's vendor/autoload.php, or Debian's php-laravel-framework).

declare(strict_types=1);

if (is_file(__DIR__ . '/../vendor/autoload.php')) {
    require __DIR__ . '/../vendor/autoload.php';
} else {
    foreach (['Cache', 'Config', 'Container', 'Support'] as $part) {
        require_once "Illuminate/$part/autoload.php";
    }
    require __DIR__ . '/../autoload.php';
}

use Cairn\Cache\Laravel\CairnServiceProvider;
use Illuminate\Cache\CacheManager;
use Illuminate\Config\Repository as Config;
use Illuminate\Container\Container;
use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\Facade;

$port = (int)($argv[1] ?? 6380);
$app = new Container();
$app['config'] = new Config(['cache' => [
    'default' => 'cairn',
    'stores' => ['cairn' => [
        'driver' => 'cairn', 'host' => '127.0.0.1', 'port' => $port, 'prefix' => 'example',
        'tag_kinds' => ['page' => 1, 'user' => 2],     // page:N is (1, N), user:N is (2, N)
    ]],
]]);
$app['cache'] = new CacheManager($app);
Facade::setFacadeApplication($app);
(new CairnServiceProvider($app))->boot();              // Cache::extend('cairn', ...)
Cache::flush();

$renders = [];
function fragment(string $key, array $tags, int $ttl): string {
    return Cache::tags($tags)->remember($key, $ttl, function () use ($key) {
        global $renders;
        $renders[] = $key;                              // the expensive part: views, queries
        return "<div id=\"$key\">rendered at " . date('H:i:s') . '</div>';
    });
}
function page(int $page, int $user): string {
    global $renders;
    $renders = [];
    fragment("p$page.header", ["page:$page"], 3600);
    fragment("p$page.u$user.sidebar", ["page:$page", "user:$user"], 600);
    return $renders ? 'rendered ' . implode(', ', $renders) : 'all fragments from the cache';
}

$redis = Cache::getStore()->redis();
echo "page 5 for user 42: ", page(5, 42), "\n";
echo "page 7 for user 42: ", page(7, 42), "\n";
echo "page 5 for user 42: ", page(5, 42), "\n";
echo "page 5 fragments on the server: ", $redis->rawCommand('TAG.COUNT', 'WHERE', '1', '=', '5'), "\n";
Cache::tags(['page:5'])->flush();                       // page 5 was edited: one TAG.DEL WHERE 1 = 5
echo "edited page 5: Cache::tags(['page:5'])->flush()\n";
echo "page 5 fragments on the server: ", $redis->rawCommand('TAG.COUNT', 'WHERE', '1', '=', '5'), "\n";
echo "page 5 for user 42: ", page(5, 42), "\n";
echo "page 7 for user 42: ", page(7, 42), "\n";
Cache::tags(['user:42'])->flush();                      // user 42 changed settings: TAG.DEL WHERE 2 = 42
echo "user 42 changed settings: Cache::tags(['user:42'])->flush()\n";
echo "page 7 for user 42: ", page(7, 42), "\n";
