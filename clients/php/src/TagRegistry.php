<?php

declare(strict_types=1);

namespace Cairn\Cache;

/**
 * The default tag mapping: a registry of tag kinds.
 *
 * - A name "<kind><separator><integer>" whose kind is registered maps to (type of the kind,
 *   the integer): with ['page' => 1, 'user' => 2], "page:5" is (1, 5) and "user:-3" is (2, -3).
 *   The integer must be written canonically (no "+", no leading zeros, within 64 bits), so
 *   that one group has one name.
 * - Any other name ("authors", "page:about", "page:05") is hashed into the reserved type
 *   $hashedType: the value is the first 8 bytes of the name's SHA-1, read as a big-endian
 *   signed 64-bit integer. Two names colliding (odds about 2^-64 per pair) only means
 *   invalidating one also expires the other's records: a cache over-invalidates, never serves
 *   stale data.
 * - Namespaces are hashed the same way into the reserved type $namespaceType.
 *
 * The rule is the same in any language; in Python:
 *   int.from_bytes(hashlib.sha1(name.encode()).digest()[:8], "big", signed=True)
 * so a non-PHP process can expire the same groups (TAG.DEL WHERE 4294967295 = <that>).
 */
final class TagRegistry implements TagMapper
{
    /** Reserved type of hashed tag names (the largest type). */
    public const HASHED_TYPE = 4294967295;
    /** Reserved type of namespace tags (clear() / flush() of one namespace). */
    public const NAMESPACE_TYPE = 4294967294;

    private const MAX_TYPE = 4294967295;

    /** @var array<string, int> kind => type */
    private array $kinds = [];

    /**
     * @param array<string, int> $kinds kind name => tag type, e.g. ['page' => 1, 'user' => 2]
     */
    public function __construct(
        array $kinds = [],
        private string $separator = ':',
        private int $hashedType = self::HASHED_TYPE,
        private int $namespaceType = self::NAMESPACE_TYPE,
    ) {
        if ($separator === '') {
            throw new \InvalidArgumentException('the tag kind separator must not be empty');
        }
        self::checkType($hashedType, 'hashedType');
        self::checkType($namespaceType, 'namespaceType');
        if ($hashedType === $namespaceType) {
            throw new \InvalidArgumentException('hashedType and namespaceType must differ');
        }
        foreach ($kinds as $kind => $type) {
            $this->register((string) $kind, $type);
        }
    }

    /** Registers a kind: "<kind><separator><integer>" maps to ($type, integer). */
    public function register(string $kind, int $type): self
    {
        self::checkType($type, "type of kind '$kind'");
        if ($kind === '' || str_contains($kind, $this->separator)) {
            throw new \InvalidArgumentException("tag kind '$kind' must be non-empty and free of '{$this->separator}'");
        }
        if ($type === $this->hashedType || $type === $this->namespaceType) {
            throw new \InvalidArgumentException("type $type of kind '$kind' is reserved (hashed names or namespaces)");
        }
        $this->kinds[$kind] = $type;

        return $this;
    }

    public function map(string $name): array
    {
        $at = strpos($name, $this->separator);
        if ($at !== false) {
            $type = $this->kinds[substr($name, 0, $at)] ?? null;
            $digits = substr($name, $at + strlen($this->separator));
            if ($type !== null && ($value = self::canonicalInt($digits)) !== null) {
                return [$type, $value];
            }
        }

        return [$this->hashedType, self::hash($name)];
    }

    public function namespaceTag(string $namespace): array
    {
        return [$this->namespaceType, self::hash($namespace)];
    }

    /** The first 8 bytes of the SHA-1 of $name as a big-endian signed 64-bit integer. */
    public static function hash(string $name): int
    {
        // 'J' reads an unsigned big-endian 64-bit integer; PHP's int is signed 64-bit, so a
        // value of 2^63 or more comes out negative: the two's-complement reading wanted.
        return unpack('J', substr(sha1($name, true), 0, 8))[1];
    }

    private static function canonicalInt(string $s): ?int
    {
        if (preg_match('/^(0|-?[1-9][0-9]{0,18})$/', $s) !== 1) {
            return null;
        }
        $n = (int) $s;

        // 19-digit strings past PHP_INT_MAX saturate in the cast: the round trip catches them.
        return (string) $n === $s ? $n : null;
    }

    private static function checkType(int $type, string $what): void
    {
        if ($type < 0 || $type > self::MAX_TYPE) {
            throw new \InvalidArgumentException("$what must be an unsigned 32-bit integer, got $type");
        }
    }
}
