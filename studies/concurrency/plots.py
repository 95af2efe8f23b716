"""Tables and figures of the concurrency study in the seed's layout: its Tables 1-9 (scheme x
replicas, one table per batch size and ratio) with the seed's values beside cairn's, and its
Figures 4-24 as matplotlib PNGs, each with the seed's curves on the left and cairn's on the right.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
SEED = json.loads((HERE / "seed_tables.json").read_text())
REPLICAS = SEED["replicas"]
Cell = Tuple[str, int, int, int]

# Figures 4-12: every scheme; 13-15: the thread pools at 1:1; 16-24: the locking schemes.
CONSOLIDATED = {4 + 3 * ri + bi: (b, r) for ri, r in enumerate((1, 4, 9)) for bi, b in enumerate((10, 100, 250))}
POOLS = {13: 10, 14: 100, 15: 250}
LOCKING = {16 + 3 * ri + bi: (b, r) for ri, r in enumerate((1, 4, 9)) for bi, b in enumerate((10, 100, 250))}
CAIRN_LOCKING = ["pool100", "reactor", "behind", "near"]
CAIRN_POOLS = ["pool10", "pool100", "pool250"]


def seed_table(batch: int, ratio: int) -> Dict[str, Any]:
    return next(t for t in SEED["tables"] if t["batch"] == batch and t["reads_per_write"] == ratio)


def fmt_cell(r: Dict[str, Any]) -> str:
    if r is None:
        return "–"
    if r.get("status") != "measured":
        return f"n/a at {r.get('commit', '?')}"
    return f"{r['median_ms']:.2f} [{r['min_ms']:.2f}–{r['max_ms']:.2f}]"


def _seed_label(row: Dict[str, Any]) -> str:
    return row["scheme"] + (f", pool {row['pool']}" if row["pool"] else "")


def _cairn_panel(ax: Any, results: Dict[Cell, Dict[str, Any]], schemes: List[str], batch: int, ratio: int,
                 labels: Dict[str, str]) -> None:
    missing = []
    for s in schemes:
        pts = [(n, results[(s, n, batch, ratio)]) for n in REPLICAS if (s, n, batch, ratio) in results]
        got = [(n, r) for n, r in pts if r.get("status") == "measured"]
        if pts and not got:
            missing.append(s)
        if not got:
            continue
        xs = [n for n, _ in got]
        med = [r["median_ms"] for _, r in got]
        err = [[m - r["min_ms"] for m, (_, r) in zip(med, got)], [r["max_ms"] - m for m, (_, r) in zip(med, got)]]
        ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=labels[s])
    if missing:
        commit = next((results[(s, n, batch, ratio)].get("commit") for s in missing for n in REPLICAS
                       if (s, n, batch, ratio) in results), "?")
        ax.text(0.02, 0.02, f"not available at {commit}:\n" + ", ".join(missing), transform=ax.transAxes,
                fontsize=7, va="bottom", color="gray")
    ax.set_title("cairn (median of runs, min-max bars)", fontsize=9)
    _axes(ax)


def _axes(ax: Any) -> None:
    ax.set_xlabel("replica caches")
    ax.set_ylabel("latency per batch (ms)")
    ax.set_xticks(REPLICAS)
    ax.set_xlim(1.5, 10.5)
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6)


def _figure(path: Path, title: str, seed_rows: List[Dict[str, Any]], results: Dict[Cell, Dict[str, Any]],
            schemes: List[str], batch: int, ratio: int, labels: Dict[str, str]) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for row in seed_rows:
        left.plot(REPLICAS, row["ms"], marker="s", label=_seed_label(row))
    left.set_title("seed (Dev & Chirkova, Appendix A)", fontsize=9)
    _axes(left)
    _cairn_panel(right, results, schemes, batch, ratio, labels)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def draw(results: Dict[Cell, Dict[str, Any]], schemes: List[str], labels: Dict[str, str], out: Path) -> List[str]:
    names = []
    for fig, (b, r) in CONSOLIDATED.items():
        writes = max(1, round(b / (r + 1)))
        _figure(out / f"figure_{fig}.png", f"Figure {fig}: all schemes, {writes} writes and {b - writes} reads",
                seed_table(b, r)["rows"], results, schemes, b, r, labels)
        names.append(f"figure_{fig}.png")
    for fig, b in POOLS.items():
        rows = [row for row in seed_table(b, 1)["rows"] if row["pool"]]
        _figure(out / f"figure_{fig}.png", f"Figure {fig}: thread pools of 10, 100, 250 at {b} requests, 1:1",
                rows, results, [s for s in CAIRN_POOLS if s in schemes], b, 1, labels)
        names.append(f"figure_{fig}.png")
    for fig, (b, r) in LOCKING.items():
        writes = max(1, round(b / (r + 1)))
        rows = [row for row in seed_table(b, r)["rows"] if row["pool"] == 100]
        _figure(out / f"figure_{fig}.png", f"Figure {fig}: locking schemes, {writes} writes and {b - writes} reads",
                rows, results, [s for s in CAIRN_LOCKING if s in schemes], b, r, labels)
        names.append(f"figure_{fig}.png")
    return names


def tables(results: Dict[Cell, Dict[str, Any]], schemes: List[str], labels: Dict[str, str]) -> List[str]:
    lines = []
    for t in SEED["tables"]:
        b, r = t["batch"], t["reads_per_write"]
        lines += [f"### Table {t['table']}: {b} requests, read:write {r}:1 (ms per batch)", "",
                  "| scheme | " + " | ".join(f"{n} replicas" for n in REPLICAS) + " |",
                  "|---|" + "---|" * len(REPLICAS)]
        for s in schemes:
            lines.append(f"| cairn: {labels[s]} | "
                         + " | ".join(fmt_cell(results.get((s, n, b, r))) for n in REPLICAS) + " |")
        for row in t["rows"]:
            lines.append(f"| seed: {row['label']} | " + " | ".join(f"{v:g}" for v in row["ms"]) + " |")
        lines.append("")
    return lines


def render(results: Dict[Cell, Dict[str, Any]], meta: Dict[str, Any], out: Path) -> str:
    from rig import SCHEMES

    labels = {s: str(SCHEMES[s]["label"]) for s in SCHEMES}
    schemes = meta["schemes"]
    figs = draw(results, schemes, labels, out)
    measured = [r for r in results.values() if r.get("status") == "measured"]
    unavailable = sorted({f"{k[0]}" for k, r in results.items() if r.get("status") == "unavailable"})
    p = meta["params"]
    commits = sorted({str(r.get("commit")) for r in measured})
    lines = [f"# Concurrency study (seed 003){' — quick run' if meta['quick'] else ''}", "",
             f"Cells measured with cairn {', '.join(commits) or '(none)'}. This page was written by the last"
             f" invocation, with cairn {meta['machine']['commit']}; {meta['machine']['text']} (each cell's"
             " JSON in cells/ has its own commit).", "",
             f"{len(measured)} of {len(results)} cells measured; replicas {meta['replicas']}; {p['runs']} runs per cell,"
             f" {p['batches']} batch(es) per client per run; {p['keys']} object(s); at most {p['max_conns']}"
             f" connections per client and server; {p['db_latency_ms']:g} ms added per writing database transaction.",
             ""]
    if unavailable:
        reason = next(r["reason"] for r in results.values() if r.get("status") == "unavailable")
        lines += [f"Not available at {meta['machine']['commit']} (the server refused the scheme's write mode:"
                  f" \"{reason}\"): {', '.join(unavailable)}. Rerun the study when the server accepts it.", ""]
    lines += ["Cells: median over runs [min–max], ms per batch; each run's figure is the mean batch latency over"
              " the replicas' clients. The seed's rows are its Appendix A (seed_tables.json).", ""]
    lines += tables(results, schemes, labels)
    lines += ["## Figures", ""] + [f"![{f}]({f})" for f in figs] + [""]
    return "\n".join(lines)
