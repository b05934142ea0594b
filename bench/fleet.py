"""Start, inspect and stop a system's worker processes.

Each launched process gets a session (and process group) of its own, so stopping
kills the whole group: masters, forked children, work horses. Descendants seen
before the stop are killed too, in case one left the group.
"""

import os
import signal
import subprocess
import time

import psutil

from bench import env


class FleetError(RuntimeError):
    pass


LIVE = set()  # every fleet not yet stopped, so an interrupted run can stop them all


def stop_all():
    for fleet in list(LIVE):
        fleet.stop()


class Fleet:
    def __init__(self, ctx, system, procs, redis_url, extra_env=None, log_name="worker"):
        self.ctx, self.system, self.procs = ctx, system, procs
        self.env = env.worker_env(redis_url, {**system.worker_env(), **(extra_env or {})})
        self.redis_url = redis_url
        self.log_path = ctx.log_dir / f"{system.name}-{log_name}.log"
        self.popens = []
        self.argvs = []
        self.replaced = []  # launched processes that exited and were restarted (their groups too are killed at stop)
        self.restarts = 0
        self.launched_at = None

    def start(self):
        python = self.ctx.python_for(self.system)
        self.argvs = [
            [a.replace("$BENCH_REDIS_URL", self.redis_url) for a in argv]
            for argv in self.system.worker_argvs(self.procs, str(env.PEERS_BIN), python)
        ]
        LIVE.add(self)
        self.launched_at = time.time()
        self.started_mono = time.monotonic()
        self.popens = [self._launch(argv) for argv in self.argvs]
        return self

    def _launch(self, argv):
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(
                argv,
                env=self.env,
                cwd=env.REPO,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def exited(self):
        """Indexes of the launched commands whose process has exited."""
        return [i for i, p in enumerate(self.popens) if p.poll() is not None]

    def restart(self, index):
        """Launch command `index` again, as a supervisor (systemd, Kubernetes, Heroku)
        restarts a service whose process exited. Its old process group is still killed
        at stop, in case something of it lingers."""
        self.replaced.append(self.popens[index])
        self.popens[index] = self._launch(self.argvs[index])
        self.restarts += 1

    def alive(self):
        """True while any launched process or any of its descendants still runs."""
        return any(p.poll() is None for p in self.popens) or bool(self._descendants())

    def _descendants(self):
        out = []
        for p in self.popens:
            try:
                out += psutil.Process(p.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
        return out

    def pids(self):
        return {p.pid for p in self.popens if p.poll() is None} | {d.pid for d in self._descendants()}

    def tree(self):
        """[(root psutil.Process, [its direct children])] for every launched process."""
        out = []
        for p in self.popens:
            try:
                root = psutil.Process(p.pid)
                out.append((root, root.children()))
            except psutil.NoSuchProcess:
                pass
        return out

    def log_tail(self, lines=15):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self):
        """SIGKILL every process group at once. The measurement is already read, the
        Redis is thrown away after it, so there is nothing to stop gracefully for."""
        stragglers = self._descendants()
        for p in self.popens + self.replaced:
            _killpg(p.pid, signal.SIGKILL)
        for p in self.popens + self.replaced:
            p.wait()
        for d in stragglers:
            try:
                d.kill()
            except psutil.NoSuchProcess:
                pass
        self.popens, self.replaced = [], []
        LIVE.discard(self)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _killpg(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
