#!/usr/bin/env python3
"""A Mixture-of-Experts model larger than its memory (issue 20), through the CLI:
in a memory cgroup too small for the model, `ork run` keeps the routed experts
on disk and reads them into an expert cache, and its greedy text is the text of
the fully resident run; --mem and --expert-policy do the same by request;
--stats and `ork bench --json` report the cache; a budget too small, a
malformed --mem and --npu with experts on disk are clear errors.

Usage: expert_cache.py ORK [--sanitized]
(--sanitized: the cgroup part is left out - a sanitizer's own memory, its
shadow and quarantine, is many times this model's and would decide the run.)
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cgroup  # noqa: E402

SKIP = 77
PROMPT = ["-p", "Once upon a time", "-n", "24", "--temp", "0"]


def run(ork, args, preexec=None, timeout=120):
    p = subprocess.run([ork] + args, capture_output=True, text=True, timeout=timeout, preexec_fn=preexec)
    return p.returncode, p.stdout, p.stderr


def expect(cond, what, detail=""):
    if not cond:
        raise SystemExit("FAIL: %s\n%s" % (what, detail))


def main():
    ork = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="ork-experts-") as d:
        gguf, pack = os.path.join(d, "moe.gguf"), os.path.join(d, "moe.orkpack")
        # 4 layers of 32 experts (4 routed) of 512 x 512: 57 MB as Q4_0, nearly all of it experts.
        rc, _, err = run(ork, ["synth", "--arch", "qwen3moe", "--n-embd", "512", "--layers", "4", "--experts", "32",
                               "--experts-used", "4", "--expert-ff", "512", "--vocab", "320", "--type", "Q4_0", "-o",
                               gguf])
        expect(rc == 0, "synth", err)
        rc, _, err = run(ork, ["pack", gguf, "-o", pack])
        expect(rc == 0, "pack", err)
        size = os.path.getsize(pack)

        rc, want, err = run(ork, ["run", "-m", pack] + PROMPT)
        expect(rc == 0 and want.strip(), "the resident run", err)
        expect("expert cache" not in err, "a model that fits loads whole", err)

        # By request: --mem below the model, either policy, with --stats.
        for policy in ("lru", "lfu"):
            rc, out, err = run(ork, ["run", "-m", pack, "--mem", "30M", "--expert-policy", policy, "--stats"] + PROMPT)
            expect(rc == 0, "--mem 30M --expert-policy " + policy, err)
            expect(out == want, "--mem 30M (%s) gives the resident run's text" % policy, out + "\n---\n" + want)
            expect("expert cache of" in err and policy in err, "the cache is announced", err)
            expect("ork: experts: generation: hit rate" in err, "--stats reports the cache", err)

        rc, out, _ = run(ork, ["bench", "-m", pack, "--mem", "30M", "-p", "8", "-n", "8", "-r", "1", "--json"])
        expect(rc == 0, "bench --mem --json", out)
        report = json.loads(out)
        expect(report["experts"]["requests"] > 0 and report["experts"]["bytes_read"] > 0, "bench's experts", out)

        # Clear errors, nothing run.
        rc, _, err = run(ork, ["run", "-m", pack, "--mem", "4M"] + PROMPT)
        expect(rc == 1 and "too small" in err and "MiB" in err, "--mem 4M is refused with the numbers", err)
        rc, _, err = run(ork, ["run", "-m", pack, "--mem", "lots"] + PROMPT)
        expect(rc != 0 and "--mem lots" in err, "a malformed --mem names itself", err)
        rc, _, err = run(ork, ["run", "-m", pack, "--mem", "30M", "--npu", "vnpu:rk3588"] + PROMPT)
        expect(rc != 0 and "--npu" in err and "expert cache" in err, "--npu with experts on disk is refused", err)

        if "--sanitized" in sys.argv:
            print("SKIP cli.expert_cache (cgroup part): a sanitizer build's own memory exceeds the cap")
            print("PASS cli.expert_cache (without the cgroup part)")
            return 0
        # By necessity: a memory cgroup of half the model (it counts the page
        # cache too). With no --mem, ork sees the cgroup's limit, keeps the
        # experts on disk, and says why.
        cg = cgroup.memory_cgroup(size // 2 + (24 << 20), "experts")
        if cg is None:
            print("SKIP cli.expert_cache (cgroup part): no writable memory cgroup (v1 /sys/fs/cgroup/memory or v2)")
            return SKIP
        path, procs = cg

        def enter():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        try:
            rc, out, err = run(ork, ["run", "-m", pack, "--stats"] + PROMPT, preexec=enter)
            expect(rc == 0, "the run in a cgroup of %d MiB" % ((size // 2 + (24 << 20)) >> 20), err)
            expect(out == want, "the capped run gives the resident run's text", out + "\n---\n" + want)
            expect("does not fit in the memory available" in err and "expert cache of" in err,
                   "the capped run keeps its experts on disk and says why", err)
        finally:
            cgroup.remove(path)
    print("PASS cli.expert_cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
