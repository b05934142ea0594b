"""examples/django_site with cogworker.django: jobs found by app config,
enqueue_on_commit, the web UI behind the admin's login, and a real prefork worker
(cogworker.django.worker) shipping an order placed through a view."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from datetime import UTC
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
    from cogworker.django import autodiscover

    assert autodiscover() == ["examples.django_site.shop.jobs"]
    from examples.django_site.shop import jobs

    return jobs


def test_jobs_are_found_through_the_app_config(shop: Any) -> None:
    from cogworker.core.middleware import server_middleware
    from cogworker.core.registry import registry
    from cogworker.django import fresh_connections

    assert registry["examples.django_site.shop.jobs.ship_order"] is shop.ship_order
    server_middleware.add(fresh_connections)  # what ready() installed (conftest clears middleware)


def test_enqueue_on_commit_waits_for_the_commit(shop: Any) -> None:
    from django.db import transaction

    from cogworker import testing
    from cogworker.django import enqueue_on_commit

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
    static = ROOT / "cogworker" / "web" / "static"
    for name, kind in (("app.css", "text/css"), ("app.js", "javascript")):
        served = client.get(f"/admin/cogworker/static/{name}")  # was a 200 with an empty body
        assert served.status_code == 200 and kind in served["Content-Type"], name
        assert served.content == (static / name).read_bytes(), name
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


def test_the_worker_logs_utc_under_django(site: Path, masters: Any, own_config: Any) -> None:
    """django.setup() sets TZ to the project's TIME_ZONE (America/Chicago here, Django's
    default): the worker's lines keep UTC, as outside Django."""
    from datetime import datetime

    master = masters(
        module="cogworker.django.worker",
        procs=1,
        env={
            "DJANGO_SETTINGS_MODULE": "examples.django_site.settings",
            "EXAMPLE_DJANGO_DB": str(site),
            "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)]),
        },
    )
    master.wait_children()
    now = datetime.now(UTC).replace(tzinfo=None)
    stamps = re.findall(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d{3} \d+ ", master.output(), re.M)
    assert stamps, master.output()
    for stamp in stamps:  # within minutes of UTC now, not hours off
        assert abs((datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S") - now).total_seconds()) < 300, stamps


def test_a_real_worker_ships_an_order_placed_through_the_view(
    site: Path, shop: Any, masters: Any, own_config: Any
) -> None:
    from django.test import Client
    from prefork_harness import wait_for

    from examples.django_site.shop.models import Order

    master = masters(
        module="cogworker.django.worker",
        procs=2,
        env={
            "DJANGO_SETTINGS_MODULE": "examples.django_site.settings",
            "EXAMPLE_DJANGO_DB": str(site),
            "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)]),
        },
    )
    master.wait_children()
    order = Client().post("/orders/", {"email": "c@example.com"}).json()["order"]
    try:
        wait_for(lambda: Order.objects.get(pk=order).shipped, timeout=60, what="the worker to ship the order")
    except AssertionError:
        raise AssertionError(master.output()[-3000:]) from None


# -- in a real browser, through a real server of the Django site --------------------------------


class DjangoServer:
    """The example site's WSGI application (Django's own handler, as gunicorn runs it) on a
    threaded HTTP server of the standard library, in this process, on a free port."""

    def __init__(self) -> None:
        import threading
        from socketserver import ThreadingMixIn
        from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

        from django.core.wsgi import get_wsgi_application
        from redis_server import free_port

        class Quiet(WSGIRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Threaded(ThreadingMixIn, WSGIServer):
            daemon_threads = True

        self.port = free_port()
        self.httpd = make_server(
            "127.0.0.1", self.port, get_wsgi_application(), server_class=Threaded, handler_class=Quiet
        )
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def browser(site: Path) -> Iterator[Any]:
    pytest.importorskip("playwright")
    from web_harness import CHROMIUM_ARGS, chromium_path

    if chromium_path() is None:
        pytest.skip("no chromium (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def staff_user(site: Path) -> str:
    """A staff user's name (password: the same plus "-pw"), made before Playwright's loop
    runs in this thread (Django's ORM refuses to run inside an event loop)."""
    from django.contrib.auth.models import User

    staff, _ = User.objects.get_or_create(username="browser-ops", defaults={"is_staff": True})
    staff.set_password("browser-ops-pw")
    staff.save()
    return staff.username


def logged_in(browser: Any, server: DjangoServer, javascript: bool) -> Any:
    """A page of a new browser context, logged in to the admin as ``staff_user``."""
    page = browser.new_context(java_script_enabled=javascript, viewport={"width": 1280, "height": 860}).new_page()
    page.set_default_timeout(20_000)
    page.goto(server.url("/admin/login/?next=/admin/cogworker/dead"))
    page.fill("#id_username", "browser-ops")
    page.fill("#id_password", "browser-ops-pw")
    page.click('input[type="submit"]')
    page.wait_for_url("**/admin/cogworker/dead")
    return page


def test_the_ui_in_a_browser_through_the_django_mount(shop: Any, config: Any, staff_user: str, browser: Any) -> None:
    """Styled, scripted, and "Delete all" with JavaScript off asks the server's question
    and deletes nothing until it is answered."""
    from api_util import failed, fill

    from cogworker import api

    fill(config.redis(), config.keys.dead, [failed("apps.x.gone", [i]) for i in range(4)], time.time())
    server = DjangoServer()
    try:
        page = logged_in(browser, server, javascript=True)
        # app.css applies: the header's background is the stylesheet's, not the browser's default
        header = page.evaluate("getComputedStyle(document.querySelector('header')).backgroundColor")
        assert header == "rgb(31, 42, 54)", header
        # app.js runs: "select all" ticks every row's box
        page.check("input[data-select-all]")
        assert page.eval_on_selector_all(
            'input[type="checkbox"][name="entry"]', "boxes => boxes.length == 4 && boxes.every(b => b.checked)"
        )
        asked: list[str] = []
        page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
        page.click('form.toolbar button[value="delete"]')  # "Delete all", its dialog dismissed
        assert asked == ["Apply to every entry of Dead (4)?"]
        assert api.DeadSet(config).size() == 4
        page.context.close()

        page = logged_in(browser, server, javascript=False)
        page.click('form.toolbar button[value="delete"]')  # no script: no dialog, the server asks
        page.wait_for_selector("text=Are you sure?")
        assert "Delete all 4 entries of Dead? This cannot be undone." in page.inner_text("main")
        assert api.DeadSet(config).size() == 4  # nothing deleted yet
        header = page.evaluate("getComputedStyle(document.querySelector('header')).backgroundColor")
        assert header == "rgb(31, 42, 54)", header  # the stylesheet needs no script
        page.click("text=Cancel")
        page.wait_for_url("**/admin/cogworker/dead")
        assert api.DeadSet(config).size() == 4
        page.click('form.toolbar button[value="delete"]')
        page.click("main form button.danger")  # "Delete all": confirmed
        page.wait_for_url("**/admin/cogworker/dead")
        assert api.DeadSet(config).size() == 0
        assert "delete: 4 entries" in page.inner_text(".flash")
    finally:
        server.stop()


def test_the_old_paths_work_for_one_release_with_a_warning() -> None:
    """cogworker.django_support and cogworker.django_worker moved into cogworker.django: the
    old imports give the same objects, with a DeprecationWarning naming the new path."""
    import subprocess

    code = (
        "import warnings\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n"
        "    import cogworker.django_support\n"
        "except DeprecationWarning as w:\n"
        "    print(w)\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "import cogworker.django_support as old, cogworker.django as new\n"
        "print(old.CogworkerConfig is new.CogworkerConfig, old.admin_urls is new.admin_urls,"
        " old.enqueue_on_commit is new.enqueue_on_commit)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    warned, same = done.stdout.strip().splitlines()
    assert "cogworker.django_support is now cogworker.django" in warned
    assert same == "True True True"
