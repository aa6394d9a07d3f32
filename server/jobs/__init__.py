"""Tune jobs: their rows (store), running one on a worker (runner), and the executors that hand jobs
to workers — in-process threads by default, Celery workers over a Redis broker for a cluster."""
