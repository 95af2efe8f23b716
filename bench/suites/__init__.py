"""One module per benchmark suite, each with run(opts, ...): run.py's (mdcached, null, pipeline,
memory, scaling, latency, eviction) and app_suites.py's (tags, sql, tracking)."""
