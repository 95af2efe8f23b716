<?php

declare(strict_types=1);

namespace Cairn\Cache\Laravel;

use Illuminate\Cache\TaggedCache;

/**
 * What Cache::tags([...]) returns on the cairn store: Laravel's TaggedCache (events carry the
 * tags, putMany/many per key) with keys derived from the tag names alone, without reading tag
 * versions from the server, and a flush() that is TAG.DEL.
 *
 * As in Laravel, an item written under tags is read back under the same names in the same
 * order (the key is sha1 of the names joined by '|', then ':' and the key): tags(['posts'])
 * and tags(['users']) hold different items for one key.
 */
class CairnTaggedCache extends TaggedCache
{
    public function taggedItemKey($key)
    {
        return sha1(implode('|', $this->tags->getNames())) . ':' . $key;
    }

    /** Removes every record carrying any of these tags: TAG.DEL, one round trip. */
    public function flush()
    {
        return $this->store->flush();
    }
}
