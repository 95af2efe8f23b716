<?php

declare(strict_types=1);

namespace Cairn\Cache;

/**
 * Turns a framework's tag names (strings such as "page:5" or "authors") into cairn typed tags:
 * pairs of a type (unsigned 32-bit) and a value (signed 64-bit). Both drivers (Symfony's
 * adapter, Laravel's store) take one; TagRegistry is the default rule.
 *
 * A mapping must be a pure function of the name, the same in every process that writes or
 * invalidates the same cache: a tag is found again only through the pair it maps to.
 */
interface TagMapper
{
    /**
     * The typed tag for a tag name.
     *
     * @return array{0: int, 1: int} [type, value]
     */
    public function map(string $name): array;

    /**
     * The typed tag every record of a namespace (Symfony's namespace, Laravel's prefix) carries,
     * so that clearing the namespace is one TAG.DEL.
     *
     * @return array{0: int, 1: int} [type, value]
     */
    public function namespaceTag(string $namespace): array;
}
