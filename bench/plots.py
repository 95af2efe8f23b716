"""Plots of the benchmark pages (matplotlib, imported only when a suite draws): bars with
min..max whiskers, lines, the memory figure; the colours of each server family."""

from __future__ import annotations


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


COLORS = {"cairn": ["#1b7837", "#5aae61", "#a6dba0"], "redis": ["#b2182b"], "memcached": ["#2166ac", "#67a9cf"]}


def color_for(label, idx_by_family={}):
    fam = "cairn" if label.startswith("cairn") else "redis" if label.startswith("redis") else "memcached"
    key = (fam, label)
    if key not in idx_by_family:
        idx_by_family[key] = len([k for k in idx_by_family if k[0] == fam])
    pal = COLORS[fam]
    return pal[idx_by_family[key] % len(pal)]


def _kfmt(ax):
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(
        lambda v, _: f"{v / 1e6:g}M" if abs(v) >= 1e6 else f"{v / 1e3:g}k" if abs(v) >= 1e4 else f"{v:g}"))


def error_bars(ax, series, color_of, fill=0.95):
    """Draws grouped bars with min-max error bars: series is {label: [(median, lo, hi) or None per
    group]}; missing and NaN points are skipped. Returns [(bars, heights)] per series."""
    width = 0.8 / max(1, len(series))
    drawn = []
    for i, (label, vals) in enumerate(series.items()):
        xs, ys, lo, hi = [], [], [], []
        for g, v in enumerate(vals):
            if v is None or v[0] != v[0]:
                continue
            xs.append(g - 0.4 + width * (i + 0.5))
            ys.append(v[0])
            lo.append(max(0, v[0] - v[1]))
            hi.append(max(0, v[2] - v[0]))
        bars = ax.bar(xs, ys, width * fill, label=label, color=color_of(label), yerr=[lo, hi], capsize=2,
                      error_kw={"elinewidth": 0.8, "ecolor": "#333"})
        drawn.append((bars, ys))
    return drawn


def grouped_bars(path, title, ylabel, groups, series, note=None, log=False):
    """groups: x tick labels; series: {label: [(median, lo, hi) or None per group]}."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(min(12, max(7, 0.35 * len(groups) * max(1, len(series)) + 3)), 4.6))
    n = max(1, len(series))
    error_bars(ax, series, color_for, 0.95)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    if not log:
        _kfmt(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=2 if n > 4 else 1)
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, color="#555")
    fig.tight_layout(rect=(0, 0.03 if note else 0, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def lines(path, title, xlabel, ylabel, xs, series, note=None, logx=False, ref_lines=None):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    for label, vals in series.items():
        pts = [(x, v) for x, v in zip(xs, vals) if v is not None and v[0] == v[0]]
        if not pts:
            continue
        ax.errorbar([p[0] for p in pts], [p[1][0] for p in pts],
                    yerr=[[max(0, p[1][0] - p[1][1]) for p in pts], [max(0, p[1][2] - p[1][0]) for p in pts]],
                    marker="o", capsize=3, label=label, color=color_for(label))
    for label, y in (ref_lines or {}).items():
        ax.axhline(y, ls="--", lw=1, label=label, color=color_for(label))
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_xlabel(xlabel)
    _kfmt(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, color="#555")
    fig.tight_layout(rect=(0, 0.03 if note else 0, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_memory(path_rss, path_own, results, labels, configs, nkeys, note):
    """One panel per value size (linear scales, so the differences show), bars labelled with bytes/key."""
    plt = _plt()
    keys_txt = f"{nkeys / 1e6:g}M" if nkeys >= 1_000_000 else f"{nkeys // 1000}k"
    for path, metric, ylabel, title in (
            (path_rss, "rss_per_key", "RSS bytes per key", "Resident memory per key (lower is better)"),
            (path_own, "own_per_key", "bytes per key (server's own accounting)",
             "Memory per key as each server accounts it")):
        fig, axes = plt.subplots(1, len(configs), figsize=(4.2 * len(configs) + 1, 4.6))
        for ax, (cname, vsize) in zip(axes, configs):
            names = list(labels)
            vals = [triple(results[cname].get(k), metric) for k in names]
            xs = range(len(names))
            bars = ax.bar(xs, [v[0] if v else 0 for v in vals], 0.7, color=[color_for(labels[k]) for k in names],
                          yerr=[[v[0] - v[1] if v else 0 for v in vals], [v[2] - v[0] if v else 0 for v in vals]],
                          capsize=3)
            for b, v in zip(bars, vals):
                if v:
                    ax.annotate(f"{v[0]:.0f}", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                                va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
            ax.axhline(16 + vsize, ls="--", lw=1, color="#555", label=f"payload ({16 + vsize} B)")
            ax.set_xticks(list(xs))
            ax.set_xticklabels([labels[k] for k in names], fontsize=8)
            ax.set_title(f"{keys_txt} keys: 16 B key + {cname} value", fontsize=10)
            ax.set_ylabel(ylabel)
            ax.grid(axis="y", alpha=0.3)
            ax.legend(fontsize=8, loc="lower right")
        fig.suptitle(title)
        fig.text(0.01, 0.01, note, fontsize=7, color="#555")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        fig.savefig(path, dpi=110)
        plt.close(fig)


def triple(agg, metric, scale=1.0):
    m = agg.get(metric) if agg else None
    if not m:
        return None
    return (m["median"] * scale, m["min"] * scale, m["max"] * scale)
