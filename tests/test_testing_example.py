"""The testing guide's worked example of cogworker.testing (examples/signup.py), as written there."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cogworker import testing
from cogworker.core.registry import register

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from examples import signup as jobs  # noqa: E402

mailer = jobs  # the guide's `mailer.sent`


@pytest.fixture(autouse=True)
def fresh() -> None:
    jobs.users.clear()
    jobs.sent.clear()
    register(jobs.sign_up)  # again: conftest resets the registry after each test
    register(jobs.send_welcome)


def test_sign_up_sends_the_welcome_inline() -> None:
    with testing.inline():  # each enqueue runs its job now, here
        jobs.sign_up.enqueue("a@example.com")
    assert mailer.sent == [(1, "welcome")]  # the scheduled one ran at once too


def test_sign_up_schedules_the_welcome(cogworker_fake: Any) -> None:
    jobs.sign_up.enqueue("a@example.com")
    assert [j["class"] for j in cogworker_fake.jobs("default")] == ["examples.signup.sign_up"]
    cogworker_fake.drain(until=time.time())  # what is due now: sign_up, which schedules the mail
    assert mailer.sent == []
    (welcome,) = cogworker_fake.jobs()
    assert welcome["args"] == [1] and welcome["at"] > time.time() + 590
    cogworker_fake.drain()  # the rest, scheduled ones included
    assert mailer.sent == [(1, "welcome")]
