<?php

declare(strict_types=1);

namespace Cairn\Cache\Laravel;

use Illuminate\Cache\Lock;
use Illuminate\Cache\LuaScripts;

/**
 * Cache::lock() on cairn: SET NX (EX when the lock has a lifetime); release compares the owner
 * and deletes in one script (Laravel's own). Locks carry no tags, so no flush removes a held
 * lock.
 */
class CairnLock extends Lock
{
    public function __construct(private \Redis $redis, $name, $seconds, $owner = null)
    {
        parent::__construct($name, $seconds, $owner);
    }

    public function acquire()
    {
        $options = $this->seconds > 0 ? ['NX', 'EX' => $this->seconds] : ['NX'];

        return $this->redis->set($this->name, $this->owner, $options) === true;
    }

    public function release()
    {
        return (bool) $this->redis->eval(LuaScripts::releaseLock(), [$this->name, $this->owner], 1);
    }

    public function forceRelease()
    {
        $this->redis->del($this->name);
    }

    protected function getCurrentOwner()
    {
        return $this->redis->get($this->name);
    }
}
