"""What a measurement cost Redis: ``INFO cpu`` (used_cpu_user + used_cpu_sys, the whole
server process: main thread, I/O, timers) and ``INFO stats`` total_commands_processed,
read at two moments; the difference divided by the jobs done between them.

Redis runs its commands on one core, so 1 / (Redis CPU per job) is the jobs/s one Redis
core carries for a system (the results' projection). The two INFO calls are themselves
two commands and a few µs: negligible against thousands of jobs.
"""


def snapshot(r):
    """(CPU seconds, commands processed) of the server so far."""
    cpu = r.info("cpu")
    stats = r.info("stats")
    return cpu["used_cpu_user"] + cpu["used_cpu_sys"], stats["total_commands_processed"]


def per_job(before, after, jobs):
    """{"redis_us": µs of Redis CPU per job, "redis_cmds": commands per job} between two snapshots."""
    if not jobs or before is None or after is None:
        return {"redis_us": None, "redis_cmds": None}
    return {"redis_us": (after[0] - before[0]) * 1e6 / jobs, "redis_cmds": (after[1] - before[1] - 2) / jobs}
