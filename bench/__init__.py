"""Side-by-side benchmarks: cogworker against Celery, RQ, Dramatiq and Huey (`python -m bench`)."""
