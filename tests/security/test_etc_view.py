"""The sandbox's /etc as root: one read-only overlay per process that hides the host's secrets
(`confine.etc_view`), bound by every sandbox instead of six masks per sandbox; the masks where the
view cannot be made; a dead harness's view swept (docs/security.md, "What the sandbox sees")."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from hrbench.envs.local import LocalBackend, bwrap_available, confine
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

pytestmark = [pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is required"),
              pytest.mark.skipif(os.geteuid() != 0, reason="the view is made as root only")]

SECRETS = [s for s in confine._HOST_SECRETS if os.path.lexists(s)]
LISTING = "for p in /etc/* /etc/.[!.]*; do [ -e \"$p\" ] || [ -L \"$p\" ] && echo \"${p#/etc/}\"; done; echo end"


def _in_sandbox(tmp_path: Path, script: str) -> str:
    env = LocalBackend(tmp_path / "cache").start(load_task(TINY_TASK), 0)
    try:
        return env.exec(script, 20).output
    finally:
        env.close()


def test_every_sandbox_binds_the_view_and_masks_nothing_itself():
    view = confine.etc_view()
    assert view is not None and os.path.ismount(view)
    args = confine.root_mounts(confine.SandboxLimits())
    assert args[args.index("/etc") - 2:args.index("/etc") + 1] == ["--ro-bind", str(view), "/etc"]
    assert not set(SECRETS) & set(args), "a secret is masked per sandbox although the view hides it"
    assert confine.etc_view() == view  # one per process


def test_the_view_is_the_hosts_etc_less_its_secrets_and_nothing_can_be_changed_through_it(tmp_path: Path):
    assert SECRETS, "this machine has none of the secrets the view hides: the test would prove nothing"
    host = sorted(p.name for p in Path("/etc").iterdir() if f"/etc/{p.name}" not in SECRETS)
    nonce = secrets.token_hex(6)
    out = _in_sandbox(tmp_path, f"""{LISTING}
for s in {' '.join(SECRETS)}; do echo "$s: $(ls -A "$s" 2>/dev/null | wc -l) entries, $(cat "$s" 2>/dev/null | wc -c) bytes"; done
sha256sum /etc/passwd
touch /etc/escape-{nonce}; echo touch=$?; umount /etc; echo umount=$?; umount -l /etc; echo lazy=$?
""")
    listing = out[:out.index("end\n")].split()
    assert sorted(n for n in listing if f"/etc/{n}" not in SECRETS) == host, out
    for secret in SECRETS:
        assert f"{secret}: 0 entries, 0 bytes" in out, out  # a file secret is gone, a directory one empty
        assert (secret.removeprefix("/etc/") in listing) == (Path(secret).parent == Path("/etc") and Path(secret).is_dir())
    assert subprocess.run(["sha256sum", "/etc/passwd"], capture_output=True, text=True).stdout.split()[0] in out
    assert "touch=0" not in out and "umount=0" not in out and "lazy=0" not in out, out
    assert not os.path.lexists(f"/etc/escape-{nonce}")


def test_a_file_made_in_etc_after_the_view_shows_in_a_sandbox(tmp_path: Path):
    # (one whose name no sandbox of this process looked up before: the overlay caches lookups, docs/security.md)
    confine.etc_view()
    probe = Path(f"/etc/hrbench-view-probe-{secrets.token_hex(6)}")
    probe.write_text("written after the view was made\n")
    try:
        assert "written after the view was made" in _in_sandbox(tmp_path, f"cat {probe}")
    finally:
        probe.unlink()


@pytest.fixture
def fresh_view():
    """This process as if it had made no view yet; its own view back afterwards (one made meanwhile removed)."""
    made = confine._etc_views.pop(os.getpid(), None)
    confine._host_root.cache_clear()
    yield
    confine._unmount_etc_view()
    confine._host_root.cache_clear()
    if made is not None:
        confine._etc_views[os.getpid()] = made


@pytest.fixture
def no_view(fresh_view, monkeypatch):
    """This process where the view cannot be made (no whiteouts: mknod refused)."""
    def refused(*args, **kwargs):
        raise PermissionError("mknod refused")

    monkeypatch.setattr(confine.os, "mknod", refused)


def test_without_the_view_each_sandbox_masks_the_secrets_itself(tmp_path: Path, no_view):
    before = set(confine.sandbox_area().iterdir())
    assert confine.etc_view() is None
    assert set(confine.sandbox_area().iterdir()) == before  # nothing left of the attempt
    args = confine.root_mounts(confine.SandboxLimits())
    assert args[args.index("/etc") - 1:args.index("/etc") + 2] == ["--ro-bind", "/etc", "/etc"]
    assert set(SECRETS) <= set(args)
    out = _in_sandbox(tmp_path, "cat /etc/shadow /etc/gshadow 2>&1; ls -A /etc/ssh 2>&1 | wc -l; echo end")
    assert "root:" not in out and out.strip().endswith("end"), out


def test_a_dead_harness_view_is_unmounted_and_removed_by_the_next(tmp_path: Path):
    child = subprocess.run(
        [sys.executable, "-c", "import os, signal; from hrbench.envs.local.confine import etc_view; "
                               "print(etc_view(), flush=True); os.kill(os.getpid(), signal.SIGKILL)"],
        capture_output=True, text=True, cwd=Path(__file__).parents[2])
    view = Path(child.stdout.strip())
    assert child.returncode == -9 and view.name == "view" and os.path.ismount(view), child
    confine.sweep_stale.__wrapped__(confine.sandbox_area())
    assert not os.path.ismount(view) and not view.parent.exists()


CHILD = """
import sys, tempfile
from pathlib import Path
from hrbench.envs.local import LocalBackend, confine
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK
print("view", confine.etc_view())
env = LocalBackend(Path(tempfile.mkdtemp())).start(load_task(TINY_TASK), 0)
print(env.exec(f"cat {sys.argv[1]}/what /etc/shadow 2>&1", 10).output)
env.close()
"""


def test_a_mount_below_etc_is_seen_as_a_bind_shows_it_not_what_it_covers(tmp_path: Path):
    # overlayfs does not cross mounts: with one below /etc (a container's bound /etc/hosts) the view would
    # show what the mount covers, so the process masks per sandbox instead. In a mount namespace of its own.
    folder = Path(f"/etc/hrbench-covered-{secrets.token_hex(6)}")
    folder.mkdir()
    (folder / "what").write_text("covered by the mount\n")
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    script = f"mount -t tmpfs tmpfs {folder} && echo 'the mount' > {folder}/what && exec {sys.executable} {child} {folder}"
    try:
        out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True,
                             text=True, cwd=Path(__file__).parents[2], timeout=120,
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    finally:
        (folder / "what").unlink()
        folder.rmdir()
    assert "view None" in out.stdout and "the mount" in out.stdout, out
    assert "covered by the mount" not in out.stdout and "root:" not in out.stdout, out


def test_a_secret_reached_through_a_symlink_is_masked_by_bwrap(tmp_path: Path, fresh_view, monkeypatch):
    # a whiteout would hide the link, not what it leads to
    real = Path(f"/etc/hrbench-secret-{secrets.token_hex(6)}")
    real.mkdir()
    (real / "key").write_text("secret key\n")
    link = real.with_name(real.name + "-link")
    link.symlink_to(real.name)
    monkeypatch.setattr(confine, "_HOST_SECRETS", [*confine._HOST_SECRETS, str(link)])
    try:
        assert confine.etc_view() is None
        assert str(link) in confine.root_mounts(confine.SandboxLimits())
        out = _in_sandbox(tmp_path, f"cat {link}/key {real}/key 2>&1; echo end")
    finally:
        (real / "key").unlink()
        link.unlink()
        real.rmdir()
    assert "secret key" not in out and out.strip().endswith("end"), out
