"""Draws docs/cluster-layout.png: where cogworker's keys live on a Redis Cluster of 3
masters (the slot ranges ``redis-cli --cluster create`` makes), in the namespace layout and
in the queue layout, for one fleet of six queues. The slots are computed by the code itself
(``Config.shard``, ``keys.py``, CRC16), not typed in. Needs Graphviz's ``dot``:

    python3 docs/cluster_layout.py      # writes docs/cluster-layout.dot and docs/cluster-layout.png
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cogworker import layout  # noqa: E402 (after the path: run from a checkout)
from cogworker.keys import Keys  # noqa: E402
from cogworker.testing.cluster import key_slot  # noqa: E402

NAMESPACE = "{cogworker}"
QUEUES = ["critical", "default", "emails", "reports", "webhooks", "low"]
GROUPS = (("critical", "default"),)  # strict order between these two: one shard
MASTERS = [(0, 5460), (5461, 10922), (10923, 16383)]
SHARD_KEYS = (
    "queue:&lt;q&gt; · in_progress:* · last_beat · fenced:*<br/>schedule · retry · dead · paused · wake<br/>"
    "status · results · unique:* · limits"
)
FLEET_KEYS = "shards · periodic:* · stats:*<br/>throughput:* · masters' process:* · control:*"


def master_of(slot: int) -> int:
    return next(i for i, (low, high) in enumerate(MASTERS) if low <= slot <= high)


def cell(title: str, detail: str, color: str) -> str:
    return (
        f'<table border="1" cellborder="0" cellpadding="4" color="#4a6fa5" bgcolor="{color}" style="rounded">'
        f'<tr><td><b>{title}</b></td></tr><tr><td><font point-size="9">{detail}</font></td></tr></table>'
    )


def namespace_row() -> list[list[str]]:
    slot = key_slot(Keys(NAMESPACE).queue("x"))
    cells: list[list[str]] = [[], [], []]
    cells[master_of(slot)].append(
        cell(f"{NAMESPACE} slot {slot}", "every key of every queue<br/>and of the fleet", "#fde8cc")
    )
    return cells


def queue_row() -> list[list[str]]:
    cells: list[list[str]] = [[], [], []]
    for shard in dict.fromkeys(layout.shard_name(GROUPS, q) for q in QUEUES):
        namespace = layout.shard_namespace(NAMESPACE, shard)
        slot = key_slot(Keys(namespace).queue(shard))
        queues = ", ".join(q for q in QUEUES if layout.shard_name(GROUPS, q) == shard)
        cells[master_of(slot)].append(cell(f"{namespace} slot {slot}", f"queues: {queues}<br/>{SHARD_KEYS}", "#eef3fb"))
    fleet = key_slot(Keys(NAMESPACE).shards)
    cells[master_of(fleet)].append(cell(f"{NAMESPACE} slot {fleet}: the fleet", FLEET_KEYS, "#e3f1e0"))
    return cells


def stack(cells: list[str]) -> str:
    """A master's slots, one above the other (a cell holds one table)."""
    if not cells:
        return "idle: other apps' keys only"
    return '<table border="0" cellspacing="6">' + "".join(f"<tr><td>{c}</td></tr>" for c in cells) + "</table>"


def table() -> str:
    head = "".join(
        f'<td bgcolor="#dddddd"><b>master {i + 1}</b><br/>slots {low}-{high}</td>'
        for i, (low, high) in enumerate(MASTERS)
    )
    rows = [f"<tr><td></td>{head}</tr>"]
    for title, cells in (
        ("namespace layout<br/>(the default)", namespace_row()),
        ("queue layout<br/>COGWORKER_CLUSTER_LAYOUT=queue<br/>COGWORKER_CLUSTER_SHARDS=critical,default", queue_row()),
    ):
        tds = "".join('<td valign="top">' + stack(c) + "</td>" for c in cells)
        rows.append(f"<tr><td><b>{title}</b></td>{tds}</tr>")
    return '<table border="0" cellspacing="8">' + "".join(rows) + "</table>"


def main() -> None:
    source = f'digraph layout {{\n  node [shape=plaintext, fontname="Helvetica"];\n  grid [label=<{table()}>];\n}}\n'
    (ROOT / "docs" / "cluster-layout.dot").write_text(source)
    subprocess.run(
        ["dot", "-Tpng", "-Gdpi=110", "-o", str(ROOT / "docs" / "cluster-layout.png")],
        input=source,
        text=True,
        check=True,
    )


if __name__ == "__main__":
    main()
