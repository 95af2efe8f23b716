<?php

declare(strict_types=1);

namespace Cairn\Cache\Symfony;

use Cairn\Cache\TagCommands;
use Cairn\Cache\TagMapper;
use Cairn\Cache\TagRegistry;
use Psr\Cache\CacheItemInterface;
use Psr\Log\LoggerAwareInterface;
use Psr\Log\LoggerAwareTrait;
use Symfony\Component\Cache\Adapter\TagAwareAdapterInterface;
use Symfony\Component\Cache\CacheItem;
use Symfony\Component\Cache\Exception\InvalidArgumentException;
use Symfony\Component\Cache\Marshaller\DefaultMarshaller;
use Symfony\Component\Cache\Marshaller\MarshallerInterface;
use Symfony\Component\Cache\ResettableInterface;
use Symfony\Contracts\Cache\CacheTrait;
use Symfony\Contracts\Cache\ItemInterface;
use Symfony\Contracts\Cache\TagAwareCacheInterface;

/**
 * A Symfony cache pool on cairn whose tags are cairn typed tags.
 *
 * Each item is one record, key "<namespace>:<key>", written with TAG.SET: its value (marshalled,
 * by default with PHP's serialize), its expiry (PX, in milliseconds) and its tags, mapped to
 * (type, value) pairs by a TagMapper, plus the namespace's own tag. So:
 *  - invalidateTags(['page:5']) is one TAG.DEL WHERE 1 = 5 (several tags: their TAG.DELs in one
 *    atomic MULTI/EXEC, one round trip); no tag sets or tag versions exist to leak or race;
 *  - clear() is one TAG.DEL of the namespace's tag;
 *  - commit() of deferred items is one pipelined round trip of TAG.SETs (reading a deferred
 *    item commits first, as Symfony's adapters do).
 *
 * PSR-6 is this class; PSR-16 is Symfony's Psr16Cache wrapped around it; the contracts'
 * get($key, $callback) comes from Symfony's CacheTrait. Connection errors are logged and read
 * as misses (reads) or false (writes), as Symfony's own adapters do.
 *
 * Fetched items carry no metadata (no tags, no expiry): the tags live on the server (TAG.OF).
 */
final class CairnTagAwareAdapter implements TagAwareAdapterInterface, TagAwareCacheInterface, LoggerAwareInterface, ResettableInterface
{
    use CacheTrait;
    use LoggerAwareTrait;

    private TagCommands $commands;
    private TagMapper $tags;
    private MarshallerInterface $marshaller;
    private string $prefix;
    /** @var array{0: int, 1: int} */
    private array $namespaceTag;
    /** @var array<string, CacheItem> key => item waiting for commit() */
    private array $deferred = [];

    private static ?\Closure $createItem = null;
    private static ?\Closure $itemParts = null;

    /**
     * @param string $namespace prefix of the keys ("<namespace>:<key>"; empty: bare keys), after
     *                          the connection's OPT_PREFIX if it has one
     * @param int $defaultLifetime seconds for items without an expiry; 0 = no expiry
     * @param TagMapper|null $tags tag names to typed tags; default: a TagRegistry without kinds
     *                             (every name hashed into TagRegistry::HASHED_TYPE)
     */
    public function __construct(
        \Redis $redis,
        string $namespace = '',
        private int $defaultLifetime = 0,
        ?TagMapper $tags = null,
        ?MarshallerInterface $marshaller = null,
    ) {
        if ($namespace !== '' && strpbrk($namespace, ItemInterface::RESERVED_CHARACTERS) !== false) {
            throw new InvalidArgumentException(sprintf('Namespace "%s" contains reserved characters "%s".', $namespace, ItemInterface::RESERVED_CHARACTERS));
        }
        $this->commands = new TagCommands($redis);
        $this->tags = $tags ?? new TagRegistry();
        $this->marshaller = $marshaller ?? new DefaultMarshaller();
        $this->prefix = $this->commands->keyPrefix($namespace);
        $this->namespaceTag = $this->tags->namespaceTag($this->commands->namespaceName($namespace));

        self::$createItem ??= \Closure::bind(
            static function (string $key, mixed $value, bool $isHit): CacheItem {
                $item = new CacheItem();
                $item->key = $key;
                $item->value = $value;
                $item->isHit = $isHit;
                $item->isTaggable = true;

                return $item;
            },
            null,
            CacheItem::class
        );
        self::$itemParts ??= \Closure::bind(
            static fn(CacheItem $item): array => [
                $item->key,
                $item->value,
                $item->expiry,
                array_values($item->newMetadata[CacheItem::METADATA_TAGS] ?? []),
            ],
            null,
            CacheItem::class
        );
    }

    public function getItem(mixed $key): CacheItem
    {
        return $this->getItems([$key])[$key];
    }

    /** @return array<string, CacheItem> */
    public function getItems(array $keys = []): iterable
    {
        $commit = false;
        foreach ($keys as $key) {
            CacheItem::validateKey($key);
            $commit = $commit || isset($this->deferred[$key]);
        }
        if ($commit) {
            $this->commit();   // a deferred item asked for is written first, as in Symfony
        }
        $items = [];
        if (!$keys) {
            return $items;
        }
        $ids = array_map(fn($k) => $this->prefix . $k, $keys);
        try {
            $values = count($ids) === 1 ? [$this->commands->call('GET', $ids[0])] : $this->commands->call('MGET', ...$ids);
            if (!is_array($values)) {
                throw new \RedisException((string) $this->commands->redis()->getLastError());
            }
        } catch (\RedisException $e) {
            $this->warn('Failed to fetch items: {message}', $e->getMessage());
            $values = array_fill(0, count($ids), false);
        }
        foreach (array_values($keys) as $i => $key) {
            $raw = $values[$i] ?? false;
            $hit = false;
            $value = null;
            if (is_string($raw)) {
                try {
                    $value = $this->marshaller->unmarshall($raw);
                    $hit = true;
                } catch (\Throwable $e) {
                    $this->warn('Failed to unmarshall key "{key}": {message}', $e->getMessage(), $key);
                }
            }
            $items[$key] = (self::$createItem)($key, $value, $hit);
        }

        return $items;
    }

    public function hasItem(mixed $key): bool
    {
        CacheItem::validateKey($key);
        if (isset($this->deferred[$key])) {
            $this->commit();
        }
        try {
            return (bool) $this->commands->call('EXISTS', $this->prefix . $key);
        } catch (\RedisException $e) {
            $this->warn('Failed to check key "{key}": {message}', $e->getMessage(), $key);

            return false;
        }
    }

    /** Removes the namespace's items: one TAG.DEL (or, with a prefix, a SCAN of the prefix). */
    public function clear(string $prefix = ''): bool
    {
        $this->deferred = [];
        try {
            if ($prefix === '') {
                return $this->commands->deleteGroups([$this->namespaceTag]) !== false
                    || $this->warn('Failed to clear the cache: {message}', (string) $this->commands->lastError());
            }
            $pattern = addcslashes($this->prefix . $prefix, '*?[]\\') . '*';
            $cursor = '0';
            do {
                [$cursor, $keys] = $this->commands->call('SCAN', $cursor, 'MATCH', $pattern, 'COUNT', '1000') ?: ['0', []];
                if ($keys) {
                    $this->commands->call('DEL', ...$keys);
                }
            } while ($cursor !== '0');

            return true;
        } catch (\RedisException $e) {
            return $this->warn('Failed to clear the cache: {message}', $e->getMessage());
        }
    }

    public function deleteItem(mixed $key): bool
    {
        return $this->deleteItems([$key]);
    }

    public function deleteItems(array $keys): bool
    {
        foreach ($keys as $key) {
            CacheItem::validateKey($key);
            unset($this->deferred[$key]);
        }
        if (!$keys) {
            return true;
        }
        try {
            $this->commands->call('DEL', ...array_map(fn($k) => $this->prefix . $k, array_values($keys)));

            return true;
        } catch (\RedisException $e) {
            return $this->warn('Failed to delete items: {message}', $e->getMessage());
        }
    }

    public function save(CacheItemInterface $item): bool
    {
        if (!$item instanceof CacheItem) {
            return false;
        }
        $this->deferred[$item->getKey()] = $item;

        return $this->commit();
    }

    public function saveDeferred(CacheItemInterface $item): bool
    {
        if (!$item instanceof CacheItem) {
            return false;
        }
        $this->deferred[$item->getKey()] = $item;

        return true;
    }

    /** Writes the deferred items: one TAG.SET each, all in one pipelined round trip. */
    public function commit(): bool
    {
        $items = $this->deferred;
        $this->deferred = [];
        if (!$items) {
            return true;
        }
        $now = microtime(true);
        $records = [];
        $expired = [];
        $values = [];
        $parts = [];
        foreach ($items as $key => $item) {
            [, $value, $expiry, $tagNames] = (self::$itemParts)($item);
            $expiry ??= $this->defaultLifetime > 0 ? $now + $this->defaultLifetime : null;
            if ($expiry !== null && $expiry <= $now) {
                $expired[] = $this->prefix . $key;   // saved already expired: gone, as in Symfony
                continue;
            }
            $values[$key] = $value;
            $parts[$key] = [$expiry, $tagNames];
        }
        $ok = true;
        $marshalled = $this->marshaller->marshall($values, $failed);
        foreach ($failed ?? [] as $key) {
            $ok = $this->warn('Failed to save key "{key}": {message}', 'the value could not be marshalled', (string) $key);
        }
        foreach ($marshalled as $key => $raw) {
            [$expiry, $tagNames] = $parts[$key];
            $tags = [$this->namespaceTag];
            foreach ($tagNames as $name) {
                $tags[] = $this->tags->map($name);
            }
            $ttlMs = $expiry === null ? null : (int) ceil(($expiry - $now) * 1000);
            $records[] = [$this->prefix . $key, $raw, $ttlMs, $tags];
        }
        try {
            if ($expired) {
                $this->commands->call('DEL', ...$expired);
            }
            foreach ($this->commands->setMany($records) as $i => $stored) {
                if (!$stored) {
                    $ok = $this->warn('Failed to save key "{key}": {message}', (string) $this->commands->lastError(), substr($records[$i][0], strlen($this->prefix)));
                }
            }
        } catch (\RedisException $e) {
            $ok = $this->warn('Failed to save items: {message}', $e->getMessage());
        }

        return $ok;
    }

    /**
     * Removes every item carrying any of the tags: one TAG.DEL per tag, all of them in one
     * atomic round trip. Deferred items are committed first, so they are invalidated too.
     */
    public function invalidateTags(array $tags): bool
    {
        if ($this->deferred) {
            $this->commit();
        }
        $pairs = [];
        foreach ($tags as $name) {
            if (!is_string($name) || $name === '' || strpbrk($name, ItemInterface::RESERVED_CHARACTERS) !== false) {
                throw new InvalidArgumentException(sprintf('Invalid cache tag "%s".', get_debug_type($name) === 'string' ? $name : get_debug_type($name)));
            }
            $pairs[] = $this->tags->map($name);
        }
        try {
            return $this->commands->deleteGroups($pairs) !== false
                || $this->warn('Failed to invalidate tags: {message}', (string) $this->commands->lastError());
        } catch (\RedisException $e) {
            return $this->warn('Failed to invalidate tags: {message}', $e->getMessage());
        }
    }

    /** Commits deferred items (Symfony calls reset() between requests, as on its own adapters). */
    public function reset(): void
    {
        $this->commit();
    }

    public function __destruct()
    {
        if ($this->deferred) {
            $this->commit();
        }
    }

    /** Logs a failure (a warning, as Symfony's adapters do) and returns false. */
    private function warn(string $message, string $detail, ?string $key = null): bool
    {
        CacheItem::log($this->logger, $message, ['message' => $detail, 'key' => $key, 'cache-adapter' => self::class]);

        return false;
    }
}
