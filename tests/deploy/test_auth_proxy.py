"""Protects the documented authentication in front of the webserver: deploy/nginx-dagster.conf, run by Debian's
nginx on loopback as written (port, upstream and password file substituted), refuses requests without the
right credentials and passes authenticated ones (and websocket upgrades) to the webserver without the password."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

pytestmark = pytest.mark.slow  # needs nginx (scripts/deploy_deps.sh); ~2 s


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def webserver():
    """A loopback HTTP server standing where dagster-webserver listens; it answers with the headers it got."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_port
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(tmp_path: Path, webserver: int):
    assert Path(NGINX).exists(), "nginx is not installed: scripts/deploy_deps.sh installs it"
    port = _free_port()
    hashed = subprocess.run(["openssl", "passwd", "-apr1", "s3cret"], capture_output=True, text=True,
                            check=True).stdout.strip()
    (tmp_path / "htpasswd").write_text(f"alice:{hashed}\n")
    site = (REPO / "deploy" / "nginx-dagster.conf").read_text()
    for old, new in (("127.0.0.1:8080", f"127.0.0.1:{port}"), ("127.0.0.1:3000", f"127.0.0.1:{webserver}"),
                     ("/etc/nginx/dagster.htpasswd", str(tmp_path / "htpasswd"))):
        assert old in site, old
        site = site.replace(old, new)
    (tmp_path / "site.conf").write_text(site)
    # one process, no privilege drop (it reads the test's password file), everything under tmp_path
    (tmp_path / "nginx.conf").write_text(f"""
        daemon off; master_process off; pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;
        events {{ worker_connections 64; }}
        http {{ access_log off; client_body_temp_path {tmp_path}/body; proxy_temp_path {tmp_path}/proxy;
               include {tmp_path}/site.conf; }}
    """)
    proc = subprocess.Popen([NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode() if proc.poll() \
                is not None else "nginx did not listen"
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


def _get(url: str, user: str | None = None, password: str = "", **headers: str) -> tuple[int, dict]:
    if user:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def test_the_webserver_answers_only_with_credentials(proxy: str):
    assert _get(f"{proxy}/graphql")[0] == 401
    assert _get(f"{proxy}/graphql", "alice", "wrong")[0] == 401
    assert _get(f"{proxy}/graphql", "mallory", "s3cret")[0] == 401
    status, seen = _get(f"{proxy}/graphql", "alice", "s3cret")
    assert status == 200
    assert "authorization" not in seen and seen["x-forwarded-user"] == "alice"  # the password stops at the proxy
    status, seen = _get(f"{proxy}/graphql", "alice", "s3cret", Upgrade="websocket", Connection="Upgrade")
    assert status == 200 and seen["upgrade"] == "websocket" and seen["connection"].lower() == "upgrade"
