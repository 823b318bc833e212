"""Protects how the sandbox finds the cgroups it creates a trial's groups under: the process's own
memory, pids and cpu cgroups, also where a hierarchy is mounted from inside (a container), where a
missed match would silently fall back to per-process limits."""

from __future__ import annotations

from pathlib import Path

from hrbench.envs.confine import cgroup_bases

HOST_CGROUP = "8:pids:/\n4:memory:/process_api/abc\n1:name=systemd:/\n0::/\n"
HOST_MOUNTS = ("35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
               "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n")
# podman on cgroup v1: /proc/self/cgroup names the full path, the mount's root is the container's group
CONTAINER_CGROUP = "8:pids:/libpod_parent/libpod-1f2e\n4:memory:/libpod_parent/libpod-1f2e\n"
CONTAINER_MOUNTS = ("901 900 0:32 /libpod_parent/libpod-1f2e /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n"
                    "902 900 0:36 /libpod_parent/libpod-1f2e /sys/fs/cgroup/pids ro,nosuid - cgroup cgroup rw,pids\n")


def test_on_the_host_the_bases_are_the_mount_point_joined_with_the_own_cgroup():
    assert cgroup_bases(HOST_CGROUP, HOST_MOUNTS) == {"memory": Path("/sys/fs/cgroup/memory/process_api/abc"),
                                                      "pids": Path("/sys/fs/cgroup/pids")}


def test_in_a_container_the_own_cgroup_is_taken_relative_to_the_mount_root():
    assert cgroup_bases(CONTAINER_CGROUP, CONTAINER_MOUNTS) == {"memory": Path("/sys/fs/cgroup/memory"),
                                                                "pids": Path("/sys/fs/cgroup/pids")}


def test_a_cgroup_outside_the_mounted_subtree_is_not_used():
    outside = "8:pids:/elsewhere\n4:memory:/libpod_parent/libpod-1f2e/child\n"
    assert cgroup_bases(outside, CONTAINER_MOUNTS) == {"memory": Path("/sys/fs/cgroup/memory/child")}


def test_v2_controllers_count_only_where_the_parent_enables_them(tmp_path: Path):
    group = tmp_path / "hrbench.slice"
    group.mkdir()
    (group / "cgroup.subtree_control").write_text("cpu pids\n")
    mounts = f"40 31 0:40 / {tmp_path} rw - cgroup2 cgroup2 rw\n"
    assert cgroup_bases("0::/hrbench.slice\n", mounts) == {"pids": group, "cpu": group}  # not memory
