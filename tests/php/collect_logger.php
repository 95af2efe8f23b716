<?php
// A PSR-3 logger that keeps what Symfony's adapters log, so a scenario can print it (its
// messages with their {placeholders} filled in). Shared by the Symfony scenarios.

use Psr\Log\AbstractLogger;

class Collect extends AbstractLogger {
    public array $lines = [];
    public function log($level, $message, array $context = []): void {
        $this->lines[] = "$level: " . strtr($message, array_map(
            fn($v) => is_scalar($v) ? (string)$v : get_debug_type($v),
            array_combine(array_map(fn($k) => '{' . $k . '}', array_keys($context)), $context)
        ));
    }
}
