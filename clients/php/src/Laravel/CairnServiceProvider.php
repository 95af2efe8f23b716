<?php

declare(strict_types=1);

namespace Cairn\Cache\Laravel;

use Cairn\Cache\TagMapper;
use Cairn\Cache\TagRegistry;
use Illuminate\Support\ServiceProvider;

/**
 * Registers the 'cairn' cache driver (Cache::extend('cairn', ...)). A store in config/cache.php:
 *
 *   'cairn' => [
 *       'driver' => 'cairn',
 *       'connection' => 'cache',          // a phpredis connection of config/database.php 'redis'
 *       // or 'host' => '127.0.0.1', 'port' => 6380, 'timeout' => 0.25, 'read_timeout' => 0.5,
 *       //    'password' => null
 *       'prefix' => 'app',                // default: config('cache.prefix')
 *       'tag_kinds' => ['page' => 1, 'user' => 2],   // TagRegistry kinds ("page:5" => (1, 5))
 *       'tag_separator' => ':',
 *       // or 'tag_mapper' => App\Cache\MyTags::class (a TagMapper from the container)
 *   ],
 */
class CairnServiceProvider extends ServiceProvider
{
    public function boot()
    {
        $this->app['cache']->extend('cairn', function ($app, array $config) {
            return $app['cache']->repository(CairnServiceProvider::store($app, $config));
        });
    }

    /** The store a 'cairn' entry of config/cache.php describes. */
    public static function store($app, array $config): CairnStore
    {
        if (isset($config['host'])) {
            $redis = new \Redis();
            $redis->connect($config['host'], (int) ($config['port'] ?? 6380), (float) ($config['timeout'] ?? 0.25));
            $redis->setOption(\Redis::OPT_READ_TIMEOUT, (float) ($config['read_timeout'] ?? 0.5));
            if (!empty($config['password'])) {
                $redis->auth($config['password']);
            }
        } else {
            $redis = $app['redis']->connection($config['connection'] ?? 'default')->client();
            if (!$redis instanceof \Redis) {
                throw new \InvalidArgumentException('the cairn cache store needs a phpredis connection (client "phpredis")');
            }
        }
        $mapper = isset($config['tag_mapper'])
            ? $app->make($config['tag_mapper'])
            : new TagRegistry($config['tag_kinds'] ?? [], $config['tag_separator'] ?? ':');
        if (!$mapper instanceof TagMapper) {
            throw new \InvalidArgumentException('tag_mapper must name a ' . TagMapper::class);
        }
        $prefix = $config['prefix'] ?? ($app['config']['cache.prefix'] ?? '');

        return new CairnStore($redis, (string) $prefix, $mapper);
    }
}
