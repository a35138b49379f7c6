"""Memory cgroups for the CLI tests: a process started inside one is capped,
its page cache included (v1 /sys/fs/cgroup/memory, or v2 /sys/fs/cgroup)."""
import os
import time


def memory_cgroup(limit_bytes, tag):
    """A fresh cgroup with this limit: (its directory, its procs file), or None where none can be made."""
    for base, limit_file in (("/sys/fs/cgroup/memory", "memory.limit_in_bytes"), ("/sys/fs/cgroup", "memory.max")):
        marker = limit_file if base.endswith("memory") else "cgroup.controllers"
        if not os.path.exists(os.path.join(base, marker)):
            continue
        path = os.path.join(base, "ork-%s-%d" % (tag, os.getpid()))
        try:
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, limit_file), "w") as f:
                f.write(str(limit_bytes))
            return path, os.path.join(path, "cgroup.procs")
        except OSError:
            continue
    return None


def remove(path):
    """Removes a cgroup once its processes are gone (bounded wait)."""
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except OSError:
            time.sleep(0.1)
