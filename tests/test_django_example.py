"""examples/django_site with cogworker.django_support: jobs found by app config,
enqueue_on_commit, the web UI behind the admin's login, and a real prefork worker
(cogworker.django_worker) shipping an order placed through a view."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

django = pytest.importorskip("django")  # the `django` extra, in the `test` extra
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Django set up once for this module (settings are per process), on a new sqlite file."""
    db = tmp_path_factory.mktemp("django") / "db.sqlite3"
    os.environ["DJANGO_SETTINGS_MODULE"] = "examples.django_site.settings"
    os.environ["EXAMPLE_DJANGO_DB"] = str(db)
    sys.path.insert(0, str(ROOT))
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    yield db


@pytest.fixture
def shop(site: Path, config: Any) -> Any:
    """The shop's jobs registered again (conftest resets the registry after each test)."""
    from cogworker.django_support import autodiscover

    assert autodiscover() == ["examples.django_site.shop.jobs"]
    from examples.django_site.shop import jobs

    return jobs


def test_jobs_are_found_through_the_app_config(shop: Any) -> None:
    from cogworker.core.middleware import server_middleware
    from cogworker.core.registry import registry
    from cogworker.django_support import fresh_connections

    assert registry["examples.django_site.shop.jobs.ship_order"] is shop.ship_order
    server_middleware.add(fresh_connections)  # what ready() installed (conftest clears middleware)


def test_enqueue_on_commit_waits_for_the_commit(shop: Any) -> None:
    from django.db import transaction

    from cogworker import testing
    from cogworker.django_support import enqueue_on_commit

    with testing.fake() as fake:
        with transaction.atomic():
            enqueue_on_commit(shop.ship_order, 1)
            assert fake.jobs() == []  # not before the commit
        assert [p["args"] for p in fake.jobs()] == [[1]]
        with pytest.raises(RuntimeError), transaction.atomic():
            enqueue_on_commit(shop.ship_order, 2)
            raise RuntimeError("roll back")
        assert len(fake.jobs()) == 1  # rolled back: never enqueued
        with pytest.raises(TypeError, match="can't take these arguments"):
            enqueue_on_commit(shop.ship_order)  # type: ignore[call-arg]  # checked now, not at commit


def test_the_view_rolls_back_the_job_with_the_order(shop: Any) -> None:
    from django.test import Client

    from cogworker import testing
    from examples.django_site.shop.models import Order

    before = Order.objects.count()
    with testing.fake() as fake:
        client = Client(raise_request_exception=False)
        assert client.post("/orders/", {"email": "a@example.com", "fail": "1"}).status_code == 500
        assert fake.jobs() == [] and Order.objects.count() == before
        order = client.post("/orders/", {"email": "b@example.com"}).json()["order"]
        assert [p["args"] for p in fake.jobs()] == [[order]]
        fake.drain()
    assert Order.objects.get(pk=order).shipped


def test_the_web_ui_is_behind_the_admin_login(shop: Any) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    anonymous = client.get("/admin/cogworker/")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/?next=/admin/cogworker/")
    clerk, _ = User.objects.get_or_create(username="clerk", defaults={"is_staff": False})
    client.force_login(clerk)
    assert client.get("/admin/cogworker/").status_code == 302  # not staff: the admin's login again
    staff, _ = User.objects.get_or_create(username="ops", defaults={"is_staff": True})
    client.force_login(staff)
    page = client.get("/admin/cogworker/")
    assert page.status_code == 200 and "text/html" in page["Content-Type"]
    html = page.content.decode()
    assert 'href="/admin/cogworker/static/app.css' in html  # links follow the mount
    assert client.get("/admin/cogworker/static/app.css").status_code == 200
    assert page["Content-Security-Policy"].startswith("default-src 'none'")


def test_a_ui_action_posts_with_the_uis_csrf_token(shop: Any, config: Any) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    shop.ship_order.options(queue="pausable").enqueue(1)
    client = Client(enforce_csrf_checks=True)  # Django's own check on: the view is exempt from it
    staff, _ = User.objects.get_or_create(username="ops", defaults={"is_staff": True})
    client.force_login(staff)
    page = client.get("/admin/cogworker/queues/pausable").content.decode()
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token, page[:2000]
    forged = client.post("/admin/cogworker/queues/pausable/pause", {"csrf": "forged"})
    assert forged.status_code == 403
    done = client.post("/admin/cogworker/queues/pausable/pause", {"csrf": token.group(1)})
    assert done.status_code in (200, 303), done.content[:500]
    from cogworker import api

    assert api.queue("pausable", config).paused()


def test_a_real_worker_ships_an_order_placed_through_the_view(site: Path, shop: Any, masters: Any,
                                                              own_config: Any) -> None:
    from django.test import Client
    from prefork_harness import wait_for

    from examples.django_site.shop.models import Order

    master = masters(module="cogworker.django_worker", procs=2,
                     env={"DJANGO_SETTINGS_MODULE": "examples.django_site.settings", "EXAMPLE_DJANGO_DB": str(site),
                          "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])})
    master.wait_children()
    order = Client().post("/orders/", {"email": "c@example.com"}).json()["order"]
    try:
        wait_for(lambda: Order.objects.get(pk=order).shipped, timeout=60, what="the worker to ship the order")
    except AssertionError:
        raise AssertionError(master.output()[-3000:]) from None
