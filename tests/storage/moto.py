"""moto's S3 server on loopback (a real HTTP server, boto3 talks to it as to S3), and a loopback TCP
proxy in front of it that a test can kill and restart (moto keeps its state in memory, so killing
the server itself would lose the bucket; killing the proxy is the same outage seen from hrbench)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PROXY = Path(__file__).with_name("tcp_proxy.py")
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening on 127.0.0.1:{port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


class Process:
    """A server subprocess on a loopback port."""

    def __init__(self, argv: list[str], port: int, what: str):
        self.argv, self.port, self.what = argv, port, what
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Process":
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env={**os.environ, **CREDENTIALS})
        _wait_listening(self.port, self.proc, self.what)
        return self

    def kill(self) -> None:
        """SIGKILL: no goodbye on open connections (as when a server machine dies)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def moto_server(port: int | None = None) -> Process:
    port = port or free_port()
    server = Path(sys.executable).with_name("moto_server")
    return Process([str(server), "-H", "127.0.0.1", "-p", str(port)], port, "moto_server").start()


def tcp_proxy(target_port: int, port: int | None = None) -> Process:
    port = port or free_port()
    return Process([sys.executable, str(PROXY), str(port), str(target_port)], port, "tcp proxy").start()


def create_bucket(endpoint_url: str, bucket: str) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=bucket)
