<?php

declare(strict_types=1);

namespace Cairn\Cache\Laravel;

use Cairn\Cache\TagCommands;
use Cairn\Cache\TagMapper;
use Cairn\Cache\TagRegistry;
use Illuminate\Cache\TagSet;
use Illuminate\Contracts\Cache\LockProvider;
use Illuminate\Contracts\Cache\Store;

/**
 * A Laravel cache store on cairn whose tags are cairn typed tags.
 *
 * Every record is written with TAG.SET and carries the prefix's namespace tag plus, under
 * Cache::tags([...]), the typed tags the names map to (TagMapper; default TagRegistry). Hence:
 *  - Cache::tags(['page:5'])->flush() is one TAG.DEL WHERE 1 = 5 (several names: their
 *    TAG.DELs in one atomic MULTI/EXEC, one round trip). No tag sets, no tag versions: nothing
 *    to leak, nothing that races with a flush (laravel/framework #43850, #61328);
 *  - Cache::flush() is one TAG.DEL of the prefix's namespace tag: it removes this store's
 *    records only (Laravel's RedisStore runs FLUSHDB), and leaves locks alone;
 *  - add() is atomic (a script: EXISTS, then TAG.SET), increment() tags the counter it creates.
 *
 * Values are stored as Laravel's RedisStore stores them: numbers as they are (so INCRBY works
 * on them), anything else with serialize().
 */
class CairnStore implements Store, LockProvider
{
    private const ADD_SCRIPT = <<<'LUA'
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
redis.call('tag.set', KEYS[1], unpack(ARGV))
return 1
LUA;

    protected TagCommands $commands;
    protected TagMapper $tags;
    protected string $prefix;
    /** @var list<array{0: int, 1: int}> the namespace tag, then the tags of Cache::tags() */
    protected array $recordTags;
    /** @var list<array{0: int, 1: int}>|null the tags a flush() removes (null: the namespace) */
    protected ?array $flushTags = null;

    public function __construct(\Redis $redis, string $prefix = '', ?TagMapper $tags = null)
    {
        $this->commands = new TagCommands($redis);
        $this->tags = $tags ?? new TagRegistry();
        $this->prefix = $this->commands->keyPrefix($prefix);
        $this->recordTags = [$this->tags->namespaceTag($this->commands->namespaceName($prefix))];
    }

    /** The phpredis connection. */
    public function redis(): \Redis
    {
        return $this->commands->redis();
    }

    public function getPrefix()
    {
        return $this->prefix;
    }

    public function getTagMapper(): TagMapper
    {
        return $this->tags;
    }

    /**
     * A tagged cache: what it writes carries the names' typed tags; its flush() removes every
     * record carrying any of them, written under any combination of names.
     *
     * @param array|mixed $names
     */
    public function tags($names)
    {
        $names = is_array($names) ? array_values($names) : func_get_args();
        $view = clone $this;
        $view->flushTags = [];
        foreach ($names as $name) {
            $pair = $this->tags->map((string) $name);
            $view->flushTags[] = $pair;
            $view->recordTags[] = $pair;
        }
        $view->recordTags = array_values(array_unique($view->recordTags, SORT_REGULAR));

        return new CairnTaggedCache($view, new TagSet($view, $names));
    }

    public function get($key)
    {
        $value = $this->commands->call('GET', $this->prefix . $key);

        return $value === false ? null : $this->unserialize($value);
    }

    public function many(array $keys)
    {
        if (!$keys) {
            return [];
        }
        $values = $this->commands->call('MGET', ...array_map(fn($k) => $this->prefix . $k, array_values($keys)));
        $out = [];
        foreach (array_values($keys) as $i => $key) {
            $out[$key] = ($values[$i] ?? false) === false ? null : $this->unserialize($values[$i]);
        }

        return $out;
    }

    public function put($key, $value, $seconds)
    {
        return $this->putMany([$key => $value], $seconds);
    }

    /** One TAG.SET per value, in one pipelined round trip. */
    public function putMany(array $values, $seconds)
    {
        $ttlMs = $seconds === null ? null : max(1, (int) $seconds) * 1000;
        $records = [];
        foreach ($values as $key => $value) {
            $records[] = [$this->prefix . $key, $this->serialize($value), $ttlMs, $this->recordTags];
        }

        return !in_array(false, $this->commands->setMany($records), true);
    }

    /** Stores the value only if the key is absent, atomically (one script call). */
    public function add($key, $value, $seconds)
    {
        $args = array_slice(TagCommands::setArgs($this->prefix . $key, $this->serialize($value), max(1, (int) $seconds) * 1000, $this->recordTags), 2);

        return (bool) $this->commands->call('EVAL', self::ADD_SCRIPT, '1', $this->prefix . $key, ...$args);
    }

    /**
     * INCRBY, and the record's tags (TAG.ADD, a no-op when it has them), in one MULTI/EXEC sent
     * as one round trip: a counter created here is flushed with its namespace and tags.
     */
    public function increment($key, $value = 1)
    {
        $redis = $this->redis();
        $id = $this->prefix . $key;
        $tagArgs = [];
        foreach ($this->recordTags as [$type, $tagValue]) {
            array_push($tagArgs, (string) $type, (string) $tagValue);
        }
        $redis->pipeline();
        $redis->multi();
        $redis->rawCommand('INCRBY', $id, (string) (int) $value);
        $redis->rawCommand('TAG.ADD', $id, ...$tagArgs);
        $redis->exec();
        $replies = $redis->exec();
        $n = $replies[0][0] ?? false;

        return is_int($n) ? $n : false;
    }

    public function decrement($key, $value = 1)
    {
        return $this->increment($key, -$value);
    }

    public function forever($key, $value)
    {
        return $this->putMany([$key => $value], null);
    }

    public function forget($key)
    {
        return (bool) $this->commands->call('DEL', $this->prefix . $key);
    }

    /**
     * Removes this store's records (one TAG.DEL of the namespace tag) or, on a tagged view, the
     * records carrying any of its tags (one atomic round trip).
     */
    public function flush()
    {
        return $this->commands->deleteGroups($this->flushTags ?? [$this->recordTags[0]]) !== false;
    }

    public function lock($name, $seconds = 0, $owner = null)
    {
        return new CairnLock($this->commands, $this->prefix . $name, (int) $seconds, $owner);
    }

    public function restoreLock($name, $owner)
    {
        return $this->lock($name, 0, $owner);
    }

    protected function serialize(mixed $value): string
    {
        return is_numeric($value) && !in_array($value, [INF, -INF], true) && !is_nan((float) $value)
            ? (string) $value
            : serialize($value);
    }

    protected function unserialize(string $value): mixed
    {
        return is_numeric($value) ? $value : unserialize($value);
    }
}
