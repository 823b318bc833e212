"""The verifier audit of a task, reused across runs while nothing it depends on changed.

Auditing a four-stage task costs seconds of sandboxes (the demo's 25 tasks: about 34 s), and a study
re-runs it on every fresh output directory. An audit depends on the task's files, the check library,
the sandbox (backend and its limits, bubblewrap's version) and hrbench's code; its key hashes all of
them, so a changed task (or library, sandbox, code) is audited again. Only passing audits are kept: a
failure is reported fresh every time, never from a stale entry.
"""

from __future__ import annotations

from hrbench.content_cache import ContentCache, cache_key
from hrbench.envs.docker import DockerBackend
from hrbench.envs.local import LocalBackend
from hrbench.preregistration import CHECK_LIBRARY, bwrap_version, file_sha256, code_version
from hrbench.tasks.audit import StageAudit, audit_task
from hrbench.tasks.model import Task

AUDIT_CACHE = "audit"


def backend_identity(backend: LocalBackend | DockerBackend) -> dict:
    """What of a backend can change an audit's outcome: its kind and the limits it sandboxes with."""
    if isinstance(backend, DockerBackend):
        return {"backend": "docker", "memory_mb": backend.memory_mb, "cpus": backend.cpus,
                "pids_limit": backend.pids_limit, "tmp_mb": backend.tmp_mb, "file_mb": backend.file_mb,
                "workspace_mb": backend.workspace_mb,
                "base_image": backend.base_image}
    return {"backend": backend.name, "limits": backend.limits.model_dump(mode="json"), "bwrap": bwrap_version()}


def audit_key(task: Task, backend: LocalBackend | DockerBackend) -> str:
    """The cache key of one task's audit: task contents, check library, sandbox, code."""
    return cache_key({"task": task.content_hash(), "check_library": file_sha256(CHECK_LIBRARY),
                      "sandbox": backend_identity(backend), "code": code_version().source_sha256})


def cached_audit(task: Task, backend: LocalBackend | DockerBackend,
                 cache: ContentCache | None = None) -> list[StageAudit]:
    """`audit_task`, or its stored passing result for the same key."""
    cache = cache if cache is not None else ContentCache(AUDIT_CACHE)
    key = audit_key(task, backend)
    stored = cache.get(key)
    if isinstance(stored, list):
        return [StageAudit(**row) for row in stored]
    rows = audit_task(task, backend)
    if rows and all(r.ok for r in rows):
        cache.put(key, [r.model_dump(mode="json") for r in rows])
    return rows
