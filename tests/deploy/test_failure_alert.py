"""Protects failure alerts: a real failed run of the study's jobs reaches the webhook (a loopback receiver)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterInstance, build_run_status_sensor_context

from pipelines.builder import build_definitions
from pipelines.materialize import QUIET
from tests.conftest import TINY, TINY_STUDY


@pytest.fixture
def receiver():
    """An HTTP server on loopback that keeps every JSON body posted to it."""
    bodies: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", bodies
    server.shutdown()
    server.server_close()


def test_a_failed_run_is_posted_to_the_webhook(tmp_path: Path, receiver, monkeypatch):
    url, bodies = receiver
    monkeypatch.setenv("HRBENCH_ALERT_WEBHOOK", url)
    monkeypatch.setenv("HRBENCH_WEBSERVER_URL", "http://dagster.internal:3000/")
    defs = build_definitions(TINY_STUDY, tmp_path)
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(TINY.agents, ["ghost"])  # an agent the study does not declare: the run fails
    result = defs.resolve_job_def(TINY.name("agent_registration_job")).execute_in_process(
        partition_key="ghost", instance=instance, raise_on_error=False, run_config=QUIET,
        tags={"hrbench/study": "tiny", "hrbench/agent": "ghost"})
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == DagsterEventType.RUN_FAILURE)

    sensor = defs.get_sensor_def(TINY.name("run_failure_alert"))
    context = build_run_status_sensor_context(sensor_name=sensor.name, dagster_instance=instance,
                                              dagster_run=result.dagster_run, dagster_event=failure)
    sensor(context.for_run_failure())

    assert len(bodies) == 1
    body = bodies[0]
    assert body["run_id"] == result.run_id and body["job"] == TINY.name("agent_registration_job")
    assert body["tags"]["hrbench/agent"] == "ghost"
    assert "tiny__agent_registration_job failed (study tiny, agent ghost" in body["text"]
    assert body["url"] == f"http://dagster.internal:3000/runs/{result.run_id}"


def test_an_unreachable_webhook_fails_the_tick(tmp_path: Path, monkeypatch):
    from pipelines.defs.operations.alerts import post_json

    with pytest.raises(OSError):
        post_json("http://127.0.0.1:9/hook", {"text": "x"})  # the discard port: nothing listens
