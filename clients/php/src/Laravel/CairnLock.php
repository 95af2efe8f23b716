<?php

declare(strict_types=1);

namespace Cairn\Cache\Laravel;

use Cairn\Cache\TagCommands;
use Illuminate\Cache\Lock;
use Illuminate\Cache\LuaScripts;

/**
 * Cache::lock() on cairn: SET NX (EX when the lock has a lifetime); release compares the owner
 * and deletes in one script (Laravel's own). Locks carry no tags, so no flush removes a held
 * lock.
 */
class CairnLock extends Lock
{
    public function __construct(private TagCommands $commands, $name, $seconds, $owner = null)
    {
        parent::__construct($name, $seconds, $owner);
    }

    public function acquire()
    {
        $expiry = $this->seconds > 0 ? ['EX', (string) $this->seconds] : [];

        return $this->commands->call('SET', $this->name, (string) $this->owner, 'NX', ...$expiry) === true;
    }

    public function release()
    {
        return (bool) $this->commands->call('EVAL', LuaScripts::releaseLock(), '1', $this->name, (string) $this->owner);
    }

    public function forceRelease()
    {
        $this->commands->call('DEL', $this->name);
    }

    protected function getCurrentOwner()
    {
        return $this->commands->call('GET', $this->name);
    }
}
