"""Draws docs/job-life.png: a job's life, from its enqueue to where it ends, each arrow
named by the lifecycle hook event that fires on it (cogworker.core.hooks.EVENTS; the
guide's table says when each fires). tests/test_docs_site.py checks that every event is
drawn, so a new event can't be left out. Needs Graphviz's `dot`:

    python3 docs/job_life.py        # writes docs/job-life.dot and docs/job-life.png
"""

from __future__ import annotations

import subprocess
from pathlib import Path

DOCS = Path(__file__).resolve().parent

# Where a job can be: (node, label, shape). Redis keys in the labels are under the namespace.
PLACES = [
    ("enqueue", "enqueue\n(job.enqueue, enqueue_in, enqueue_at)", "plaintext"),
    ("schedule", "schedule\n(a sorted set, by time)", "box"),
    ("queue", "queue:NAME\n(a list)", "box"),
    ("in_progress", "in_progress:IDENTITY\n(the process's own list)", "box"),
    ("running", "running\n(a child, or a task of its loop)", "ellipse"),
    ("retry", "retry\n(a sorted set, by time)", "box"),
    ("done", "succeeded\n(status and history kept, bounded)", "doubleoctagon"),
    ("dead", "dead\n(10,000 newest, 180 days)", "doubleoctagon"),
    ("cancelled", "cancelled", "doubleoctagon"),
    ("expired", "expired\n(not run)", "doubleoctagon"),
]

# (from, to, label): a label that is an event name is that hook's arrow; the others are moves
# no hook reports (the poller's, the fetch's).
ARROWS = [
    ("enqueue", "queue", "enqueued"),
    ("enqueue", "schedule", "enqueued (later)"),
    ("schedule", "queue", "due: the poller moves it"),
    ("queue", "in_progress", "fetch (one script, with the last ack)"),
    ("in_progress", "running", "started"),
    ("running", "done", "succeeded"),
    ("running", "retry", "retrying"),
    ("retry", "queue", "due"),
    ("running", "dead", "dead (retries used up)"),
    ("in_progress", "queue", "given_back (a stop, a quiet)"),
    ("running", "queue", "suspended (an iterable job's cursor saved)"),
    ("in_progress", "queue", "orphaned (its process died: requeued at once)"),
    ("in_progress", "dead", "dead (orphaned too often)"),
    ("running", "schedule", "over a rate limit"),
    ("queue", "cancelled", "cancelled"),
    ("running", "cancelled", "cancelled"),
    ("in_progress", "expired", "expired (waited past its expires)"),
]


def dot() -> str:
    lines = [
        "digraph job_life {",
        "  rankdir=TB; nodesep=0.5; ranksep=0.6;",
        '  node [fontname="Helvetica", fontsize=11]; edge [fontname="Helvetica", fontsize=9];',
    ]
    for name, label, shape in PLACES:
        lines.append(f'  {name} [label="{label}", shape={shape}];')
    for start, end, label in ARROWS:
        lines.append(f'  {start} -> {end} [label="{label}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def events_drawn() -> set[str]:
    """The hook events the arrows name (each label's first word)."""
    return {label.split()[0] for _, _, label in ARROWS}


def main() -> None:
    source = dot()
    (DOCS / "job-life.dot").write_text(source)
    subprocess.run(["dot", "-Tpng", "-Gdpi=110", "-o", str(DOCS / "job-life.png")], input=source, text=True, check=True)


if __name__ == "__main__":
    main()
