#!/usr/bin/env bash
# Installs what the test suite needs, only where it is missing (idempotent):
#   - Debian packages: redis-server redis-tools memcached libmemcached-tools netcat-openbsd
#     redis-sentinel (tests/test_sentinel.py)
#   - php-cli php-redis (phpredis, for tests/php) when php or its redis extension is missing
#   - php-symfony-cache php-laravel-framework php-psr-simple-cache (tests/test_frameworks_php.py,
#     tests/test_php_drivers.py: clients/php) when missing
#   - postgresql (the thesis study, studies/thesis, starts its own cluster) when initdb is missing
#   - a Python virtual environment at .venv with the pins from requirements-test.txt
#   - the cairn Python client (clients/python) installed there in editable mode
#   - Django's own cache test cases (tests/cache of the pinned Django's source) in .venv/django-tests
#   - the newest tested redis-py (REDIS_NEWEST) in .venv/redis-newest, beside the pinned one
# Usage: scripts/setup.sh            (from anywhere; works relative to the repo root)
# Env:   PYTHON=python3.11 to choose the interpreter for the venv.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
fi

apt_updated=0
apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        log "apt-get not available; please install manually: $*"
        return 1
    fi
    if [ "$apt_updated" = 0 ]; then
        log "apt-get update"
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        apt_updated=1
    fi
    log "apt-get install $*"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- system packages (only when the command is missing) ---------------------
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-sentinel >/dev/null 2>&1 || need+=(redis-sentinel)
command -v memcached >/dev/null 2>&1 || need+=(memcached)
if ! command -v memccapable >/dev/null 2>&1 && ! command -v memcapable >/dev/null 2>&1; then
    need+=(libmemcached-tools)
fi
command -v nc >/dev/null 2>&1 || need+=(netcat-openbsd)
if [ "${#need[@]}" -gt 0 ]; then
    apt_install "${need[@]}"
    # The Debian packages start system services; the tests start their own
    # instances on free ports, so the system ones are not needed.
    for svc in redis-server redis-sentinel memcached; do
        if command -v systemctl >/dev/null 2>&1; then
            $SUDO systemctl stop "$svc" >/dev/null 2>&1 || true
        fi
    done
fi

# --- PHP with phpredis (tests/php: the typed-tag commands through rawCommand) ---
# Only when php is missing or lacks the redis extension.  Not fatal: without it
# the PHP test skips and says why.
if ! command -v php >/dev/null 2>&1 || ! grep -qix redis <<<"$(php -m 2>/dev/null)"; then
    apt_install php-cli php-redis || log "could not install php-cli php-redis; the PHP tag test will skip"
fi

# --- Laravel and Symfony caches from Debian (tests/test_frameworks_php.py drives them) --------
# Only the packages whose autoloader PHP cannot find. Not fatal: those tests skip and say why.
php_has() { command -v php >/dev/null 2>&1 && php -r "exit(stream_resolve_include_path('$1') ? 0 : 1);" 2>/dev/null; }
frameworks=()
php_has Symfony/Component/Cache/autoload.php || frameworks+=(php-symfony-cache)
php_has Illuminate/Cache/autoload.php || frameworks+=(php-laravel-framework)
# PSR-16 for Symfony's Psr16Cache (clients/php's tests, tests/test_php_drivers.py)
php_has Psr/SimpleCache/autoload.php || frameworks+=(php-psr-simple-cache)
if [ "${#frameworks[@]}" -gt 0 ]; then
    apt_install "${frameworks[@]}" || log "could not install ${frameworks[*]}; the framework tests will skip"
fi

# --- PostgreSQL (studies/thesis runs its own throwaway cluster; the package's service is not used) ---
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && ! command -v initdb >/dev/null 2>&1; then
    apt_install postgresql
    if command -v systemctl >/dev/null 2>&1; then
        $SUDO systemctl stop postgresql >/dev/null 2>&1 || true
    fi
fi

# --- Python venv ---------------------------------------------------------------
PYTHON="${PYTHON:-python3}"
VENV=.venv
REQ=requirements-test.txt
STAMP="$VENV/.requirements-test.stamp"

if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV with $PYTHON"
    if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
        rm -rf "$VENV"
        # Debian's system python needs python3-venv for ensurepip.
        apt_install python3-venv
        "$PYTHON" -m venv "$VENV"
    fi
fi

if [ ! -f "$STAMP" ] || ! cmp -s "$REQ" "$STAMP"; then
    log "installing Python test requirements into $VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ"
    cp "$REQ" "$STAMP"
fi

# --- the Python client (clients/python), editable, for tests/test_client*.py ---
if ! "$VENV/bin/python" -c 'import cairn, sys; sys.exit("clients/python/src" not in cairn.__file__)' >/dev/null 2>&1; then
    log "installing the cairn Python client (editable) into $VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e clients/python
fi
# --- Django's BaseCacheTests (tests/test_django_cache.py): they ship in the sdist, not the wheel ---
DJANGO_VERSION="$(sed -n 's/^django==//p' "$REQ")"
DJT="$VENV/django-tests"
if [ -n "$DJANGO_VERSION" ] && [ ! -f "$DJT/.django-$DJANGO_VERSION" ]; then
    log "unpacking Django $DJANGO_VERSION's cache test cases into $DJT"
    tmp="$(mktemp -d)"
    if "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
            -d "$tmp" "django==$DJANGO_VERSION" \
        && rm -rf "$DJT" && mkdir -p "$DJT" \
        && tar xzf "$tmp/django-$DJANGO_VERSION.tar.gz" -C "$DJT" --strip-components=2 \
            "django-$DJANGO_VERSION/tests/cache"; then
        touch "$DJT/.django-$DJANGO_VERSION"
    else
        log "could not fetch Django's source; tests/test_django_cache.py skips Django's BaseCacheTests"
    fi
    rm -rf "$tmp"
fi

# --- the newest redis-py the client is tested with (tests/test_client_redis_newest.py) ----------
# clients/python/pyproject.toml pins redis>=5.0,<9: the venv has the oldest pin above, this the newest.
REDIS_NEWEST=8.1.0
if [ ! -f "$VENV/redis-newest/redis-$REDIS_NEWEST.stamp" ]; then
    log "installing redis-py $REDIS_NEWEST into $VENV/redis-newest"
    rm -rf "$VENV/redis-newest"
    if "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
            --target "$VENV/redis-newest" "redis==$REDIS_NEWEST"; then
        touch "$VENV/redis-newest/redis-$REDIS_NEWEST.stamp"
    else
        log "could not install redis-py $REDIS_NEWEST; tests/test_client_redis_newest.py will skip"
    fi
fi
log "ok"
