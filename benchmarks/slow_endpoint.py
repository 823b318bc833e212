"""Trials against a slow model endpoint: does throughput scale with `concurrency` up to the endpoint's limit?

A local OpenAI-compatible stub (its own process, loopback) answers every chat request after a fixed
latency (default 2 s), at most `--endpoint-limit` requests at once; each reply types one command and
declares the stage complete from the `--turns`-th turn on (the harness asks an llm agent to confirm
once, terminus-2's rule, so a stage takes turns + 1 requests). A study's checkpoint trials of a one-stage task
(real sandboxes, real verifier) run against it with an `llm` agent at each `concurrency`. For each it
prints stage-turns per second (the endpoint's ceiling is limit / latency), and CPU per trial: the
harness process's own (user+system, threads included), its reaped children's (sandbox launchers,
verifiers), and the whole machine's busy time from /proc/stat (sandboxed processes escape rusage;
other users' load is in it too, so the load average is printed beside it).

    .venv/bin/python benchmarks/slow_endpoint.py [--latency 2] [--concurrency 1 8 32] [--waves 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

TASK = "calib-parallel"  # one stage: a checkpoint trial is one stage-trial


def serve(latency: float, limit: int, turns: int) -> None:
    """The stub endpoint: prints its port, then answers until killed."""
    gate = threading.BoundedSemaphore(limit)
    served = [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the client's connection pool is reused as with a real server

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            turn = 1 + sum(m["role"] == "assistant" for m in body["messages"])
            with gate:
                time.sleep(latency)
                served[0] += 1
            text = json.dumps({"analysis": "stub", "plan": "stub", "task_complete": turn >= turns,
                               "commands": [{"keystrokes": f"echo turn {turn}\n", "duration": 0.1}]})
            reply = json.dumps({"id": f"stub-{served[0]}", "object": "chat.completion", "created": 0,
                                "model": body.get("model", "stub"),
                                "choices": [{"index": 0, "finish_reason": "stop",
                                             "message": {"role": "assistant", "content": text}}],
                                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of every core since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def measure(port: int, concurrency: int, waves: int, tmp: Path) -> dict:
    from hrbench.study_run import StudyRun

    study = {"name": f"slow-endpoint-{concurrency}", "tasks": {"registry": "builtin", "include": [TASK]},
             "agents": [{"id": "stub", "kind": "llm", "model": "stub", "base_url": f"http://127.0.0.1:{port}/v1",
                         "api_key_env": None, "max_retries": 0, "timeout_sec": 60}],
             "trials": {"checkpoint": concurrency * waves, "natural": 1}, "concurrency": concurrency}
    path = tmp / f"study-{concurrency}.yaml"
    path.write_text(yaml.safe_dump(study))
    run = StudyRun.from_file(path, tmp / f"out-{concurrency}", progress=False)
    task = run.design.task(TASK)
    run.runner.backend.for_task(task).checkpoint_state(task, 0)  # built once per study: outside the rate
    cpu0, kids0, (busy0, total0) = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN), busy_jiffies()
    start = time.perf_counter()
    records = run.runner.run_checkpoint_trials("stub", TASK)
    wall = time.perf_counter() - start
    busy1, total1 = busy_jiffies()
    hz, cores = os.sysconf("SC_CLK_TCK"), os.cpu_count() or 1
    errors = [r.error for r in records if r.exit_reason == "harness_error"]
    turns = sum(r.turns for r in records)
    return {"concurrency": concurrency, "trials": len(records), "errors": len(errors), "first_error": errors[:1],
            "turns": turns, "wall_s": wall, "turns_per_s": turns / wall, "trials_per_s": len(records) / wall,
            "harness_cpu_ms": 1000 * (cpu_seconds(resource.RUSAGE_SELF) - cpu0) / len(records),
            "children_cpu_ms": 1000 * (cpu_seconds(resource.RUSAGE_CHILDREN) - kids0) / len(records),
            "machine_cpu_ms": 1000 * (busy1 - busy0) / hz / len(records),
            "machine_busy": (busy1 - busy0) / max(1, total1 - total0), "cores": cores}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=2.0, help="seconds the stub takes per reply")
    parser.add_argument("--endpoint-limit", type=int, default=32, help="requests the stub serves at once")
    parser.add_argument("--turns", type=int, default=3, help="turns per stage (the last declares it complete)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--waves", type=int, default=3, help="trials = concurrency x waves")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency, args.endpoint_limit, args.turns)
        return
    stub = subprocess.Popen([sys.executable, __file__, "--serve", "--latency", str(args.latency), "--endpoint-limit",
                             str(args.endpoint_limit), "--turns", str(args.turns)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(stub.stdout.readline())
        ceiling = args.endpoint_limit / args.latency
        print(f"stub: {args.latency:g} s per reply, {args.endpoint_limit} at once (ceiling {ceiling:.1f} turns/s), "
              f"{args.turns} turns per stage; task {TASK}; {os.cpu_count()} cores")
        with tempfile.TemporaryDirectory() as tmp:
            for c in args.concurrency:
                load = Path("/proc/loadavg").read_text().split()[0]
                m = measure(port, c, args.waves, Path(tmp))
                print(f"concurrency {c:>3}: {m['trials']} trials ({m['errors']} errors), {m['turns']} stage-turns in "
                      f"{m['wall_s']:.1f} s = {m['turns_per_s']:.2f} stage-turns/s "
                      f"({m['turns_per_s'] / min(ceiling, c / args.latency):.0%} of the ideal); CPU per trial: harness "
                      f"{m['harness_cpu_ms']:.0f} ms, its reaped children {m['children_cpu_ms']:.0f} ms, whole machine "
                      f"{m['machine_cpu_ms']:.0f} ms (machine {m['machine_busy']:.0%} busy, load {load} at start)"
                      + (f"\n  first error: {m['first_error'][0][:300]}" if m["errors"] else ""))
    finally:
        stub.kill()
        stub.wait()


if __name__ == "__main__":
    main()
