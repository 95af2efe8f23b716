"""The tags suite (issue 4): expiring a page's or a user's fragments with TAG.DEL and reading a group
with TAG.GET, next to the Redis way (a set per tag) and memcached's flush_all; memory cost of tags.
Run by `bench/app_suites.py --suite tags`; writes tags.md / tags.json / plots (bench/README.md).
"""

from __future__ import annotations

import random
import statistics
import time

import harness as B
from app_harness import (
    _plt,
    agg,
    bar_panel,
    by_group,
    cairn_tagset,
    COL,
    commandstats,
    Conn,
    enc,
    fmt_num,
    fmt_ratio,
    fragments,
    log,
    M,
    McConn,
    md_table,
    met,
    N_PAGES,
    N_RECORDS,
    N_USERS,
    pct,
    redis_tagged_write,
    Report,
    reset_stats,
    S,
    save_fig,
    settle_rss,
    start_server,
    StatsTap,
    stop_all,
    T,
    timed_block,
    TYPE_PAGE,
    TYPE_USER,
    us,
    used_memory,
    value_of,
    VALUE_SIZE,
)


def run(opts, machine):
    started = time.monotonic()
    q = opts.quick
    n_page, n_user, n_get = (200, 20, 50) if q else (1000, 100, 200)
    rep = Report("tags", opts, machine, {"records": N_RECORDS, "pages": N_PAGES, "users": N_USERS,
                                         "value_bytes": VALUE_SIZE, "page_expiries_per_repeat": n_page,
                                         "user_expiries_per_repeat": n_user, "group_reads_per_repeat": n_get})
    recs = fragments()
    pages, users = by_group(recs)
    servers = []
    res = rep.data["results"]
    try:
        # ---- memory: a fresh cairn with plain SETs, a fresh cairn with TAG.SETs; Redis SET then SADDs
        mem = {}
        plain = start_server("cairn", label="cairn (plain SET)")
        servers.append(plain)
        c = Conn(plain.resp_port)
        u0, r0 = used_memory(plain.resp_port), settle_rss(plain, 0.2)
        _, dt = timed_block(lambda: c.pipeline([enc("SET", r[1], value_of(r[0])) for r in recs]))
        u1, r1 = used_memory(plain.resp_port), settle_rss(plain)
        mem["cairn_plain"] = {"used_per_record": (u1 - u0) / N_RECORDS, "rss_per_record": (r1 - r0) / N_RECORDS}
        c.close()
        plain.stop()
        servers.remove(plain)
        log(f"tags: cairn plain load {dt:.1f}s")

        cairn = start_server("cairn")
        redis = start_server("redis")
        memc = start_server("memcached")
        servers += [cairn, redis, memc]
        cc = Conn(cairn.resp_port)
        u0, r0 = used_memory(cairn.resp_port), settle_rss(cairn, 0.2)
        _, dt = timed_block(lambda: cc.pipeline([cairn_tagset(r) for r in recs]))
        u1, r1 = used_memory(cairn.resp_port), settle_rss(cairn)
        mem["cairn_tagged"] = {"used_per_record": (u1 - u0) / N_RECORDS, "rss_per_record": (r1 - r0) / N_RECORDS}
        log(f"tags: cairn TAG.SET load {dt:.1f}s")

        rc = Conn(redis.resp_port)
        u0, r0 = used_memory(redis.resp_port), settle_rss(redis, 0.2)
        rc.pipeline([enc("SET", r[1], value_of(r[0])) for r in recs])
        u1, r1 = used_memory(redis.resp_port), settle_rss(redis)
        _, dt = timed_block(lambda: rc.pipeline([x for r in recs for x in redis_tagged_write(r)[1:]]))
        u2, r2 = used_memory(redis.resp_port), settle_rss(redis)
        mem["redis_plain"] = {"used_per_record": (u1 - u0) / N_RECORDS, "rss_per_record": (r1 - r0) / N_RECORDS}
        mem["redis_tagged"] = {"used_per_record": (u2 - u0) / N_RECORDS, "rss_per_record": (r2 - r0) / N_RECORDS}
        log(f"tags: redis SADD load {dt:.1f}s")
        for k in ("cairn", "redis"):
            mem[f"{k}_tags"] = {m: mem[f"{k}_tagged"][m] - mem[f"{k}_plain"][m] for m in ("used_per_record", "rss_per_record")}
        res["memory"] = mem

        mc = McConn(memc.mc_port)
        mc_items = [(r[1], value_of(r[0])) for r in recs]

        samples = {k: [] for k in ("cairn_page", "cairn_user", "cairn_get", "redis_page", "redis_user", "redis_get",
                                   "memcached_flush")}
        for r_i in range(opts.repeats):
            rng = random.Random(1000 + r_i)
            sel_pages = rng.sample(sorted(pages), n_page)
            sel_users = rng.sample(sorted(users), n_user)
            get_users = rng.sample(sorted(users), n_get)

            # ---- cairn
            for what, ids, cmd in (("get", get_users, lambda u: ("TAG.GET", "WHERE", TYPE_USER, "=", u)),
                                   ("page", sel_pages, lambda p: ("TAG.DEL", "WHERE", TYPE_PAGE, "=", p)),
                                   ("user", sel_users, lambda u: ("TAG.DEL", "WHERE", TYPE_USER, "=", u))):
                reset_stats(cairn.resp_port)
                name = "tag.get" if what == "get" else "tag.del"
                tap = StatsTap(cairn.resp_port, [name])
                rtt, ping, sizes, cursors, per_call = [], [], [], 0, []
                for x in ids:
                    ping.append(cc.timed("PING")[1])
                    v, ns = cc.timed(*cmd(x))
                    rtt.append(ns)
                    per_call.append(tap.delta())
                    if what == "get":
                        if v[0] not in (b"0", 0):
                            cursors += 1
                        pairs = v[1]
                        sizes.append(len(pairs) // 2 if pairs and not isinstance(pairs[0], list) else len(pairs))
                    else:
                        sizes.append(v)
                tap.close()
                st = commandstats(cairn.resp_port)
                calls, usec = st[name]
                samples[f"cairn_{what}"].append({
                    "server_us": pct(per_call, 50), "server_p99_us": pct(per_call, 99),
                    "server_mean_us": usec / calls, "calls": calls, "rtt_p50_us": pct(rtt, 50) / 1e3,
                    "rtt_p99_us": pct(rtt, 99) / 1e3, "ping_p50_us": pct(ping, 50) / 1e3,
                    "records_per_call": statistics.mean(sizes), "round_trips": 1, "cursor_continuations": cursors})
                if what != "get":  # put the expired records back: every repeat sees the full data set
                    group = pages if what == "page" else users
                    cc.pipeline([cairn_tagset(r) for x in ids for r in group[x]])
                    assert cc.call("DBSIZE") == N_RECORDS

            # ---- Redis: SMEMBERS, then DEL of the members and the set (expiry) or MGET (read)
            for what, ids, prefix in (("get", get_users, b"tag:user:%d"), ("page", sel_pages, b"tag:page:%d"),
                                      ("user", sel_users, b"tag:user:%d")):
                reset_stats(redis.resp_port)
                parts = ["smembers", "mget" if what == "get" else "del"]
                tap = StatsTap(redis.resp_port, parts)
                rtt, rtt1, ping, sizes, per_call = [], [], [], [], []
                for x in ids:
                    ping.append(rc.timed("PING")[1])
                    tag = prefix % x
                    members, ns1 = rc.timed("SMEMBERS", tag)
                    if what == "get":
                        vals, ns2 = rc.timed("MGET", *members) if members else ([], 0)
                        sizes.append(len([v for v in vals if v is not None]))
                    else:
                        n_del, ns2 = rc.timed("DEL", *members, tag)
                        sizes.append(n_del - 1)
                    rtt.append(ns1 + ns2)
                    rtt1.append(ns1)
                    per_call.append(tap.delta())
                tap.close()
                st = commandstats(redis.resp_port)
                usec = sum(st.get(p, (0, 0))[1] for p in parts)
                samples[f"redis_{what}"].append({
                    "server_us": pct(per_call, 50), "server_p99_us": pct(per_call, 99),
                    "server_mean_us": usec / len(ids), "rtt_p50_us": pct(rtt, 50) / 1e3, "rtt_p99_us": pct(rtt, 99) / 1e3,
                    "first_rtt_p50_us": pct(rtt1, 50) / 1e3, "ping_p50_us": pct(ping, 50) / 1e3,
                    "records_per_call": statistics.mean(sizes), "round_trips": 2,
                    **{f"{p}_us": st.get(p, (0, 0))[1] / len(ids) for p in parts}})
                if what != "get":
                    group = pages if what == "page" else users
                    rc.pipeline([x for g in ids for r in group[g] for x in redis_tagged_write(r)])

            # ---- memcached: no groups; flush_all is the only way, and it drops everything
            mc.set_noreply(mc_items)
            before = int(B.mc_stats(memc.mc_port)["curr_items"])
            floor = [mc.timed_line(b"version\r\n")[1] for _ in range(20)]
            line, ns = mc.timed_line(b"flush_all\r\n")
            assert line == b"OK", line
            probe = [r[1] for r in random.Random(r_i).sample(recs, 200)]
            hits = mc.get_hits(probe)
            samples["memcached_flush"].append({
                "rtt_us": ns / 1e3, "version_rtt_p50_us": pct(floor, 50) / 1e3, "items_before": before,
                "probe_hits_after_of_200": hits, "records_dropped": before if hits == 0 else before * (1 - hits / 200)})
            log(f"tags: repeat {r_i + 1}/{opts.repeats} done")
        cc.close()
        rc.close()
        mc.close()
        rep.data["samples"] = samples
        for k, v in samples.items():
            res[k] = agg(v)
    finally:
        stop_all(servers)

    # ---- tables
    rows = []
    for what, label, target in (("page", "expire one page", 20.0), ("user", "expire one user", 200.0),
                                ("get", "read a user's group", None)):
        a, b = res[f"cairn_{what}"], res[f"redis_{what}"]
        rows.append([label, f"{M(a, 'records_per_call'):.1f}", f"{us(M(a, 'server_us'))} {S(a, 'server_us')}",
                     f"{us(M(b, 'server_us'))} {S(b, 'server_us')}", fmt_ratio(M(a, "server_us"), M(b, "server_us")),
                     f"{us(M(a, 'server_mean_us'))} / {us(M(b, 'server_mean_us'))}",
                     f"{us(M(a, 'server_p99_us'))} / {us(M(b, 'server_p99_us'))}",
                     f"{us(M(a, 'rtt_p50_us'))} {S(a, 'rtt_p50_us')}", f"{us(M(b, 'rtt_p50_us'))} {S(b, 'rtt_p50_us')}",
                     fmt_ratio(M(a, "rtt_p50_us"), M(b, "rtt_p50_us")), us(M(a, "rtt_p99_us")), us(M(b, "rtt_p99_us")),
                     "1 / 2", f"≤ {target:.0f} µs (SQLcached {'200' if what == 'page' else '6,100'}): "
                     f"{met(M(a, 'server_us'), target)}" if target else
                     ("one round trip: **met**" if M(a, "cursor_continuations") == 0 else "needed a cursor")])
    mf = res["memcached_flush"]
    rep.md += [
        "## Expiring and reading groups (per call)", "",
        "Server time per call from `INFO commandstats`, read after every call: the growth of `usec` for "
        "`TAG.DEL` / `TAG.GET` (cairn), or for `SMEMBERS` + `DEL` (expiry) / `SMEMBERS` + `MGET` (read) together "
        "(Redis, both commands of one expiry). The p50 of those per-call figures is the headline and what the "
        "targets are checked against; the mean (= commandstats usec / calls over the batch) and p99 are shown "
        "too: on this shared machine a few calls preempted mid-command inflate the mean. Round trips are measured by a minimal Python RESP client on one loopback "
        "connection (the Redis way needs two: the member list must come back before the DEL/MGET can be sent); "
        f"a PING round trip on the same connection was {us(M(res['cairn_page'], 'ping_p50_us'))} µs (cairn) and "
        f"{us(M(res['redis_page'], 'ping_p50_us'))} µs (Redis). All times in µs.", "",
        md_table(["operation", "records / call", "cairn server p50", "Redis server p50 (SMEMBERS+DEL/MGET)",
                  "server p50 cairn / Redis", "server mean cairn / Redis", "server p99 cairn / Redis", "cairn round trip p50", "Redis 2 round trips p50", "RTT cairn / Redis",
                  "cairn RTT p99", "Redis RTT p99", "round trips", "target (issue 4)"], rows), "",
        "## memcached: the only group expiry is `flush_all`", "",
        md_table(["measurement", "value"], [
            ["`flush_all` round trip (µs)", f"{us(M(mf, 'rtt_us'))} {S(mf, 'rtt_us')}"],
            ["`version` round trip, same connection (µs)", us(M(mf, "version_rtt_p50_us"))],
            ["records in the cache before", fmt_num(M(mf, "items_before"))],
            ["of 200 sampled keys still there after", fmt_num(M(mf, "probe_hits_after_of_200"))],
            ["records dropped to expire one page (≈3 stale) or one user (≈100 stale)", fmt_num(M(mf, "records_dropped"))],
            ["cairn page expiry: records dropped", f"{M(res['cairn_page'], 'records_per_call'):.1f}"],
        ]), "",
        "`flush_all` itself is cheap (memcached marks everything invalid and reclaims lazily); the cost is that every "
        f"one of the {fmt_num(M(mf, 'items_before'))} records is gone and has to be recomputed (issue 4 quotes "
        "1,000 ms for that in seed 002's setting), where cairn and the Redis sets drop only the stale group.", "",
    ]
    mem = res["memory"]
    rows = []
    for k, label in (("cairn", "cairn (2 tags per record: page, user)"), ("redis", "Redis (2 SADDs per record)")):
        rows.append([label, us(mem[f"{k}_plain"]["used_per_record"]), us(mem[f"{k}_tagged"]["used_per_record"]),
                     us(mem[f"{k}_tags"]["used_per_record"]), us(mem[f"{k}_plain"]["rss_per_record"]),
                     us(mem[f"{k}_tagged"]["rss_per_record"]), us(mem[f"{k}_tags"]["rss_per_record"])])
    rows.append(["tags: cairn / Redis", "", "", fmt_ratio(mem["cairn_tags"]["used_per_record"], mem["redis_tags"]["used_per_record"]),
                 "", "", fmt_ratio(mem["cairn_tags"]["rss_per_record"], mem["redis_tags"]["rss_per_record"])])
    rep.md += [
        "## Memory cost of tags per record", "",
        f"{N_RECORDS:,} records of {VALUE_SIZE} B with 11-byte keys. cairn: two fresh servers, one loaded with plain "
        "SET and one with TAG.SET (page and user tags); Redis: one server, measured after the SETs and again after the "
        "SADDs to `tag:page:<p>` and `tag:user:<u>`. `used_memory` is each server's own accounting (cairn charges "
        "a fixed estimate per index entry); RSS is the process's resident memory. Bytes per record, measured once "
        "(memory is deterministic).", "",
        md_table(["server", "used_memory plain", "used_memory tagged", "tags (used_memory)", "RSS plain", "RSS tagged",
                  "tags (RSS)"], rows), "",
        "Note: the Redis sets are not cleaned when a record is expired through another tag (expiring a page leaves "
        "its keys in the users' sets until those are expired too); cairn drops every index entry of a record with it.",
    ]

    # ---- plots
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    groups = ["expire a page\n(~3 records)", "expire a user\n(~100 records)", "read a user's group\n(~100 records)"]
    ws = ["page", "user", "get"]
    bar_panel(axes[0], groups, {"cairn TAG.DEL / TAG.GET": [T(res[f"cairn_{w}"], "server_us") for w in ws],
                                "Redis SMEMBERS + DEL / MGET": [T(res[f"redis_{w}"], "server_us") for w in ws]},
              {"cairn TAG.DEL / TAG.GET": COL["cairn"], "Redis SMEMBERS + DEL / MGET": COL["redis"]},
              "server time per call, p50 (µs, log scale)", "Server time (INFO commandstats, per call)", log=True,
              targets={0: (20, "target 20 µs"), 1: (200, "target 200 µs")}, value_fmt=lambda y: us(y))
    bar_panel(axes[1], groups + ["memcached\nflush_all"],
              {"cairn (1 round trip)": [T(res[f"cairn_{w}"], "rtt_p50_us") for w in ws] + [None],
               "Redis (2 round trips)": [T(res[f"redis_{w}"], "rtt_p50_us") for w in ws] + [None],
               "memcached flush_all (drops all 100k)": [None, None, None, T(mf, "rtt_us")]},
              {"cairn (1 round trip)": COL["cairn"], "Redis (2 round trips)": COL["redis"],
               "memcached flush_all (drops all 100k)": COL["memcached"]},
              "client round trip p50 (µs, log scale)", "Round trip seen by the client (loopback)", log=True,
              value_fmt=lambda y: us(y))
    fig.suptitle("Tags (seed 002): 100k fragments, 30k pages, 1k users", fontsize=11)
    save_fig(fig, rep.png("expiry"), rep.note())

    fig, ax = plt.subplots(figsize=(7, 4.4))
    bar_panel(ax, ["used_memory", "RSS"],
              {"cairn: 2 typed tags": [(mem["cairn_tags"]["used_per_record"],) * 3, (mem["cairn_tags"]["rss_per_record"],) * 3],
               "Redis: 2 tag sets (SADD)": [(mem["redis_tags"]["used_per_record"],) * 3, (mem["redis_tags"]["rss_per_record"],) * 3]},
              {"cairn: 2 typed tags": COL["cairn"], "Redis: 2 tag sets (SADD)": COL["redis"]},
              "extra bytes per record", "Memory cost of tagging (tagged − untagged, per record)",
              value_fmt=lambda y: f"{y:.0f} B")
    save_fig(fig, rep.png("memory"), rep.note().split(";")[0] + "; measured once")

    rep.write("Application suite: typed tags (issue 4)",
              f"Seed 002's scenario: {N_RECORDS:,} cached fragments of {VALUE_SIZE} B, each tagged with one of "
              f"{N_PAGES:,} pages (≈3.3 records per page) and one of {N_USERS:,} users (≈100 records per user), "
              f"uniformly at random (seeded). Each repeat expires {n_page} pages and {n_user} users and reads {n_get} "
              "users' groups on cairn (`TAG.DEL WHERE 1 = p`, `TAG.DEL WHERE 2 = u`, `TAG.GET WHERE 2 = u`) and the "
              "same on Redis the way Symfony's and Laravel's tag-aware Redis adapters do it (a set per tag; "
              "SMEMBERS then DEL of the members and the set, or SMEMBERS then MGET), then writes the expired records "
              "back so that every repeat sees the full data set. memcached has no groups: `flush_all`.", started)
    return rep
