"""The testing guide's example (docs/guides/testing.md; tests/test_testing_example.py runs
it): a sign-up job that schedules a welcome mail ten minutes later. The "mailer" and the "users" are lists
in this process: enough for jobs run inline or by a fake."""

from __future__ import annotations

import cogworker

users: list[str] = []
sent: list[tuple[int, str]] = []


@cogworker.job(retry=3)
def send_welcome(user_id: int) -> None:
    sent.append((user_id, "welcome"))


@cogworker.job
def sign_up(email: str) -> int:
    users.append(email)
    user_id = len(users)
    send_welcome.enqueue_in(600, user_id)  # ten minutes later
    return user_id
