"""The feature tax, in Redis commands: what a job's settlement costs Redis when it uses a
feature (a batch, a group, a kept result), counted on a private server (``INFO
commandstats``: every command, a script's own and the ones it runs). Each bound is the
count of the settlement as it is written now, the reads of a record made once
(docs/internals/workflows.md); a settlement that reads more fails here. The rules of
batches, groups and results themselves are the fault and property tests'."""

from __future__ import annotations

import json
from typing import Any

from apps import wf

import cogworker
from cogworker.core import fate
from cogworker.engine.loop import Worker
from cogworker.transitions import call

QUIET = {"cmdstat_info", "cmdstat_config"}


def _calls(r: Any) -> dict[str, int]:
    return {name: stat["calls"] for name, stat in r.info("commandstats").items() if name not in QUIET}


def _settled(config: cogworker.Config, identity: str, value: Any) -> tuple[dict[str, int], Worker]:
    """The commands the first job's success costs when settled (fetched first, not counted)."""
    w = Worker([("default", None)], identity=identity, block_timeout=0)
    work = w.fetch()
    assert work is not None
    r = config.redis()
    call.load(r, "complete")  # loaded first: a NOSCRIPT and its load are not the settlement's
    before = _calls(r)
    w.settle(work, json.loads(work.raw), fate.Succeeded(0.0, value))
    after = _calls(r)
    spent = {name: n - before.get(name, 0) for name, n in after.items() if n != before.get(name, 0)}
    return spent, w


def test_a_batch_members_settlement_reads_the_record_once_per_step(own_config):
    """Not the last of its batch, a job that keeps its result: one script call, 25 commands
    (31 before: the record's open, dead and pending read in one HMGET by the asking and by
    the count, no EXISTS of the record to ask)."""
    with cogworker.batch(on_complete=wf.add.s(0, 0)) as b:
        wf.add.enqueue(1, 2)
        wf.add.enqueue(3, 4)
    spent, _ = _settled(own_config, "batch-tax", 3)
    assert spent["cmdstat_evalsha"] == 1
    assert spent.get("cmdstat_hexists", 0) == 0 and spent["cmdstat_hmget"] == 2
    assert sum(spent.values()) <= 25
    info = cogworker.api.batch(b.bid)
    assert info is not None and info.succeeded == 1 and info.pending == 1


def test_a_group_members_settlement_asks_with_one_read(own_config):
    """Not the last of its group: the asking reads n and left in one HMGET (was EXISTS,
    HGET n, HEXISTS r:<i>, HGET left): 22 commands, 26 before."""
    gid = cogworker.group([wf.add.si(1, 1), wf.add.si(2, 2), wf.add.si(3, 3)]).enqueue()
    spent, _ = _settled(own_config, "group-tax", 2)
    assert spent["cmdstat_evalsha"] == 1
    assert spent["cmdstat_hmget"] == 1 and spent.get("cmdstat_hexists", 0) == 0
    assert spent["cmdstat_hget"] == 1  # the count's own membership check
    assert sum(spent.values()) <= 22
    assert own_config.redis().hget(own_config.keys.group(gid), "left") == b"2"


def test_a_kept_results_settlement_asks_no_zscore_below_the_bound(own_config):
    """The results' index far from status_max: no shed can come, so the asking costs one
    ZCARD and no ZSCORE per result: 17 commands, 18 before."""
    jid = wf.add.enqueue(2, 3)
    spent, _ = _settled(own_config, "results-tax", 5)
    assert spent["cmdstat_evalsha"] == 1
    assert "cmdstat_zscore" not in spent and spent["cmdstat_zcard"] == 2  # the asking's, the trim's
    assert sum(spent.values()) <= 17
    assert cogworker.result(jid, timeout=1) == 5
