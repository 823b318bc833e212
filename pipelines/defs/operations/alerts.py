"""Failure alerts: a run-failure sensor that posts each failed run of this code location to a webhook.

HRBENCH_ALERT_WEBHOOK is the URL (a Slack or Mattermost incoming webhook, or any endpoint taking JSON); the sensor
runs when it is set. The body is JSON with `text` (one line, what chat webhooks show) and the run's id, job,
tags and error. A post that fails fails the sensor's tick, which Dagster shows in the UI and evaluates again
(the failed run is not skipped). HRBENCH_WEBSERVER_URL, when set, adds a link to the run's page.
"""

from __future__ import annotations

import json
import os
import urllib.request

from dagster import DefaultSensorStatus, RunFailureSensorContext, SensorDefinition, run_failure_sensor

from hrbench.catalogue import StudyNames

WEBHOOK = "HRBENCH_ALERT_WEBHOOK"
TIMEOUT_SECONDS = 10


def failure_message(context: RunFailureSensorContext) -> dict:
    """The webhook's body for one failed run."""
    run = context.dagster_run
    error = context.failure_event.message or "(no message)"
    study = run.tags.get("hrbench/study", "?")
    agent = run.tags.get("hrbench/agent")
    text = f"hrbench: {run.job_name} failed (study {study}{f', agent {agent}' if agent else ''}, run {run.run_id}): {error}"
    base = os.environ.get("HRBENCH_WEBSERVER_URL")
    return {"text": text, "run_id": run.run_id, "job": run.job_name, "tags": dict(run.tags), "error": error,
            **({"url": f"{base.rstrip('/')}/runs/{run.run_id}"} if base else {})}


def post_json(url: str, body: dict) -> None:
    """POST `body` as JSON; an HTTP error or an unreachable endpoint raises."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
        response.read()


def build_failure_alert_sensor(names: StudyNames) -> SensorDefinition:
    @run_failure_sensor(name=names.name("run_failure_alert"), minimum_interval_seconds=30,
                        default_status=DefaultSensorStatus.RUNNING if os.environ.get(WEBHOOK)
                        else DefaultSensorStatus.STOPPED,
                        description=f"Posts every failed run of this code location to ${WEBHOOK}.")
    def run_failure_alert(context: RunFailureSensorContext) -> None:
        url = os.environ.get(WEBHOOK)
        if not url:
            context.log.warning(f"{WEBHOOK} is not set: run {context.dagster_run.run_id} failed, nobody was told")
            return
        post_json(url, failure_message(context))

    return run_failure_alert
