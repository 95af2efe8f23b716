<?php

// Autoloader for a copied clients/php (no Composer): require this file, then use
// Cairn\Cache\... . With Composer, composer.json's PSR-4 rule does the same.
spl_autoload_register(static function (string $class): void {
    if (str_starts_with($class, 'Cairn\\Cache\\')) {
        $file = __DIR__ . '/src/' . strtr(substr($class, strlen('Cairn\\Cache\\')), '\\', '/') . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
