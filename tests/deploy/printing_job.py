"""A one-op job that prints: what a compute log manager captures (tests/deploy/test_instance_config.py)."""

from dagster import job, op


@op
def say() -> None:
    print("step output for the bucket")


@job
def printing_job() -> None:
    say()


@op
def fail() -> None:
    print("step output of a failing run")
    raise RuntimeError("this run fails")


@job
def failing_job() -> None:
    fail()
