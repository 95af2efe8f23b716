<?php

declare(strict_types=1);

namespace Cairn\Cache;

/**
 * cairn's typed-tag commands over one phpredis connection, as both drivers need them: tagged
 * writes (TAG.SET), batches of them in one round trip, and group invalidation (TAG.DEL) of
 * several groups in one atomic round trip.
 *
 * Error replies come back as false from phpredis; the last one is in lastError().
 */
final class TagCommands
{
    private ?string $lastError = null;

    public function __construct(private \Redis $redis)
    {
    }

    public function redis(): \Redis
    {
        return $this->redis;
    }

    /**
     * The key prefix of a namespace on this connection: phpredis's OPT_PREFIX (Laravel's
     * connections set one), then "<namespace>:". The drivers send every command with
     * rawCommand(), which applies neither OPT_PREFIX nor OPT_SERIALIZER, so they add the
     * prefix themselves and the connection's serializer does not touch their values.
     */
    public function keyPrefix(string $namespace): string
    {
        return (string) $this->redis->_prefix('') . ($namespace === '' ? '' : $namespace . ':');
    }

    /** The namespace whose tag marks a namespace's records: OPT_PREFIX, then the namespace. */
    public function namespaceName(string $namespace): string
    {
        return (string) $this->redis->_prefix('') . $namespace;
    }

    /** One command, as it is: no OPT_PREFIX, no serializer. */
    public function call(string ...$args): mixed
    {
        return $this->redis->rawCommand(...$args);
    }

    public function lastError(): ?string
    {
        return $this->lastError;
    }

    /**
     * TAG.SET's arguments: key value [PX ms] [TAG type value ...].
     *
     * @param list<array{0: int, 1: int}> $tags
     */
    public static function setArgs(string $key, string $value, ?int $ttlMs, array $tags): array
    {
        $args = ['TAG.SET', $key, $value];
        if ($ttlMs !== null) {
            $args[] = 'PX';
            $args[] = (string) max(1, $ttlMs);
        }
        foreach ($tags as [$type, $tagValue]) {
            array_push($args, 'TAG', (string) $type, (string) $tagValue);
        }

        return $args;
    }

    /**
     * Writes records with their tags: one TAG.SET, or a pipeline of them for several (one round
     * trip; each record is atomic, the batch is not a transaction).
     *
     * @param list<array{0: string, 1: string, 2: ?int, 3: list<array{0: int, 1: int}>}> $records
     *        [key, value, ttl in ms or null for none, tags]
     * @return list<bool> whether each record was stored
     */
    public function setMany(array $records): array
    {
        $this->lastError = null;
        if (count($records) === 1) {
            [$key, $value, $ttlMs, $tags] = $records[0];

            return [$this->check($this->redis->rawCommand(...self::setArgs($key, $value, $ttlMs, $tags)))];
        }
        if (!$records) {
            return [];
        }
        $this->redis->pipeline();
        foreach ($records as [$key, $value, $ttlMs, $tags]) {
            $this->redis->rawCommand(...self::setArgs($key, $value, $ttlMs, $tags));
        }
        $replies = $this->redis->exec();
        $stored = [];
        foreach ($replies as $reply) {
            $stored[] = $reply === true || $reply === 'OK';
        }
        if (in_array(false, $stored, true)) {
            $this->lastError = $this->redis->getLastError() ?? 'TAG.SET failed';
            $this->redis->clearLastError();
        }

        return $stored;
    }

    /**
     * Removes every record carrying any of the tags: one TAG.DEL for one tag; for several, their
     * TAG.DELs in one MULTI/EXEC sent as one pipeline (one round trip, atomic: no reader sees
     * some groups gone and others not).
     *
     * @param list<array{0: int, 1: int}> $tags
     * @return int|false records removed, false on an error reply
     */
    public function deleteGroups(array $tags): int|false
    {
        $this->lastError = null;
        $tags = array_values(array_unique(array_map(fn($t) => $t[0] . ' ' . $t[1], $tags)));
        if (!$tags) {
            return 0;
        }
        $del = static fn(string $t) => ['TAG.DEL', 'WHERE', ...self::where($t)];
        if (count($tags) === 1) {
            return $this->count($this->redis->rawCommand(...$del($tags[0])));
        }
        $this->redis->pipeline();
        $this->redis->multi();
        foreach ($tags as $t) {
            $this->redis->rawCommand(...$del($t));
        }
        $this->redis->exec();
        $replies = $this->redis->exec();
        $counts = is_array($replies[0] ?? null) ? $replies[0] : [false];
        $total = 0;
        foreach ($counts as $n) {
            if (!is_int($n)) {
                $this->lastError = $this->redis->getLastError() ?? 'TAG.DEL failed';
                $this->redis->clearLastError();

                return false;
            }
            $total += $n;
        }

        return $total;
    }

    /** "type value" => [type, '=', value] */
    private static function where(string $t): array
    {
        [$type, $value] = explode(' ', $t, 2);

        return [$type, '=', $value];
    }

    private function check(mixed $reply): bool
    {
        if ($reply === true || $reply === 'OK') {
            return true;
        }
        $this->lastError = $this->redis->getLastError() ?? 'unexpected reply';
        $this->redis->clearLastError();

        return false;
    }

    private function count(mixed $reply): int|false
    {
        if (is_int($reply)) {
            return $reply;
        }
        $this->lastError = $this->redis->getLastError() ?? 'unexpected reply';
        $this->redis->clearLastError();

        return false;
    }
}
