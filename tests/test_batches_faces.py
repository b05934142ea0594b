"""The batch faces besides the web UI: `cogworker batches` / `cogworker batch BID` (a real
Redis, the real command in a subprocess) and /metrics' `cogworker_batches` and
`cogworker_batch_callbacks` (a real exporter scraped over HTTP)."""

from __future__ import annotations

from apps import batch_faces as bf
from core_util import RunningWorker
from metrics_util import scrape, value
from prefork_harness import wait_for
from redis_server import free_port
from test_cli import as_json, cli, done, failed

import cogworker
from cogworker import api


def make_batches(description: str = "nightly import") -> tuple[cogworker.Batch, list[str], list[str]]:
    with cogworker.batch(
        on_success=bf.callback.s("success"), on_complete=bf.callback.s("complete"), description=description
    ) as b:
        ok = [bf.work.enqueue(f"w{i}") for i in range(3)]
        dead = [bf.doomed.enqueue("d0")]
    return b, ok, dead


def test_batches_and_batch_show_counts_callbacks_and_jobs(config):
    first, _, _ = make_batches("first one")
    b, ok, dead = make_batches()
    with RunningWorker():
        wait_for(lambda: all(api.batch(x.bid).done_at is not None for x in (first, b)), 20)
    out = done(cli("batches", url=config.redis_url))
    lines = out.splitlines()
    assert lines[0].split() == ["BATCH", "CREATED", "STATE", "JOBS", "OK", "FAILED", "PENDING", "FIRED", "DESCRIPTION"]
    assert lines[1].startswith(b.bid) and lines[2].startswith(first.bid)  # newest first
    assert lines[1].split()[3:8] == ["done", "4", "3", "1", "0"] and "on_complete" in lines[1]
    assert "on_success" not in lines[1] and lines[1].endswith("nightly import")
    assert len(done(cli("batches", "--limit", "1", url=config.redis_url)).splitlines()) == 2
    listed = as_json(cli("batches", "--json", url=config.redis_url))
    assert listed["count"] == 2 and [x["bid"] for x in listed["batches"]] == [b.bid, first.bid]
    assert listed["batches"][0]["succeeded"] == 3 and listed["batches"][0]["dead"] == 1

    shown = done(cli("batch", b.bid, url=config.redis_url))
    assert "succeeded      3" in shown and "1 (1 dead, 0 cancelled)" in shown and "state          done" in shown
    callbacks = {line.split()[0]: line for line in shown.splitlines() if line.startswith("on_")}
    assert callbacks["on_success"].endswith("not yet") and not callbacks["on_complete"].endswith("not yet")
    assert api.batch(b.bid).callbacks["on_complete"]["jid"] in callbacks["on_complete"]
    states = {
        line.split()[0]: line.split()[1]
        for line in shown.splitlines()
        if line.split()[:1] and line.split()[0] in ok + dead
    }
    assert states == {**{j: "succeeded" for j in ok}, dead[0]: "dead"}
    one = as_json(cli("batch", b.bid, "--json", url=config.redis_url))
    assert one["batch"]["bid"] == b.bid and sorted(j["jid"] for j in one["jobs"]) == sorted(ok + dead)
    assert len(done(cli("batch", b.bid, "--limit", "2", url=config.redis_url)).split("(the first 2 of 4")) == 2


def test_an_unknown_batch_is_one_line_and_exit_1(config):
    line = failed(cli("batch", "b-nosuch", url=config.redis_url), 1)
    assert "no batch 'b-nosuch'" in line
    assert done(cli("batches", url=config.redis_url)).strip() == "no batches (none made, or all expired)"
    failed(cli("batches", "--limit", "0", url=config.redis_url), 2)


def test_metrics_count_batches_created_and_callbacks_fired(own_config, masters):
    port = free_port()
    m = masters(procs=1, module="apps.batch_faces", args=["--metrics-port", str(port)])
    m.wait_children()
    wait_for(lambda: value(scrape(port), "cogworker_batches_total") == 0, 20)
    assert value(scrape(port), "cogworker_batch_callbacks_total") == 0
    made = [make_batches()[0] for _ in range(3)]
    wait_for(lambda: all(api.batch(b.bid).done_at is not None for b in made), 30, what="three batches done")
    # Sampled from Redis every 5 s: three batches, each with its on_complete fired (its
    # on_success never: a job of each died).
    wait_for(lambda: value(scrape(port), "cogworker_batches_total") == 3, 20, 0.5, what="/metrics' batches")
    wait_for(lambda: value(scrape(port), "cogworker_batch_callbacks_total") == 3, 20, 0.5, what="/metrics' callbacks")
    assert int(own_config.redis().get(own_config.keys.stats_batch_callbacks)) == 3
