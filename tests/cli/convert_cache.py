#!/usr/bin/env python3
"""A quantized GGUF converts once and runs from the cache after (issue 18):
first start converts and keeps the entry, the second opens it, --no-cache
keeps nothing, an unwritable cache is a warning, a damaged entry is rebuilt,
a killed conversion leaves nothing a later run trusts, `ork cache ls|rm`, stale and least recently used
entries make room (ORK_CACHE_MAX, ORK_CACHE_MIN_FREE); a float GGUF
with --npu is packed for the device once, an entry per profile (issue 16).

Usage: convert_cache.py ORK TESTDATA
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77


def run(ork, args, env, timeout=120):
    p = subprocess.run([ork] + args, env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def entries(d):
    return sorted(f for f in os.listdir(d)) if os.path.isdir(d) else []


def wait_for_writer(cache, timeout=60):
    """The detached writer saves the entry after ork has started: wait (bounded) until no temporary is
    held open by a live writer (a killed writer's is left, held by nobody)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not [e for e in entries(cache) if ".orkpack.ork-" in e and writer_of(os.path.join(cache, e))]:
            return
        time.sleep(0.02)
    raise SystemExit("FAIL: the cache writer did not finish in %d s: %s" % (timeout, entries(cache)))


def holders_of(path):
    """The pids of the processes (other than this one) holding `path` open."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if any(os.readlink("/proc/%s/fd/%s" % (pid, fd)) == path for fd in os.listdir("/proc/%s/fd" % pid)):
                out.append(int(pid))
        except OSError:
            continue
    return out


def writer_of(path):
    """A process (other than this one) holding `path` open, or None."""
    holders = holders_of(path)
    return holders[0] if holders else None


def parent_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def holds_only(pid, temp):
    """Whether `pid` holds only `temp` and /dev/null open; it closes the rest as it starts, so look for 0.2 s."""
    deadline = time.time() + 0.2
    while True:
        try:
            held = set(os.readlink("/proc/%d/fd/%s" % (pid, f)) for f in os.listdir("/proc/%d/fd" % pid))
        except OSError:
            return True  # gone (finished) before it could be looked at
        if held <= {temp, "/dev/null"}:
            return True
        if time.time() > deadline:
            print("writer %d holds %s" % (pid, sorted(held)))
            return False
        time.sleep(0.005)


def check(cond, what, out=""):
    if not cond:
        print("FAIL:", what)
        if out:
            print(out[-3000:])
        sys.exit(1)
    print("ok:", what)


def main():
    ork, td = sys.argv[1], sys.argv[2]
    src = os.path.join(td, "fixtures/quant/model-Q4_K_S.gguf")
    if not os.path.exists(src):
        print("SKIP convert_cache: no", src)
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "cache")
        env = dict(os.environ, ORK_CACHE_DIR=cache, TMPDIR=tmp)
        gen = ["run", "-m", src, "-p", "hello", "-n", "8", "--temp", "0"]

        rc, out1, err = run(ork, gen, env)
        check(rc == 0 and "converting" in err and "once: kept as" in err, "first start converts and keeps it", err)
        wait_for_writer(cache)
        kept = [e for e in entries(cache) if e.endswith(".orkpack")]
        check(len(kept) == 1 and entries(cache) == kept, "one entry, no temporaries: %s" % entries(cache))

        rc, out2, err = run(ork, gen, env)
        check(rc == 0 and "runs from its converted copy" in err and "converting" not in err, "second start opens it", err)
        check(out1 == out2, "same greedy text from the converted copy both times")

        rc, out3, err = run(ork, gen + ["--no-convert"], env)
        check(rc == 0 and "reference kernels" in err and "converting" not in err, "--no-convert runs the GGUF as it is", err)

        rc, out, err = run(ork, ["cache", "ls"], env)
        check(rc == 0 and kept[0] in out and "converted from model-Q4_K_S.gguf" in out, "cache ls names the entry", out)

        # A damaged entry is noticed and rebuilt.
        with open(os.path.join(cache, kept[0]), "r+b") as f:
            f.truncate(4096)
        rc, out4, err = run(ork, gen, env)
        check(rc == 0 and "damaged" in err and "converting" in err and out4 == out1, "a damaged entry is rebuilt", err)
        wait_for_writer(cache)

        rc, out, err = run(ork, ["cache", "rm", "no-such-entry"], env)
        check(rc != 0 and "no entry 'no-such-entry'" in err, "cache rm of an unknown name is an error", err)
        rc, out, err = run(ork, ["cache", "rm"], env)
        check(rc == 0 and entries(cache) == [], "cache rm empties it", err)

        # --no-cache: converted in memory, nothing written anywhere.
        rc, out5, err = run(ork, gen + ["--no-cache"], env)
        check(rc == 0 and out5 == out1 and entries(cache) == [], "--no-cache keeps nothing", err)
        check(not [f for f in os.listdir(tmp) if f.startswith("ork-convert")], "its temporary is gone")

        # A cache that cannot be written (under a regular file) is a warning.
        blocker = os.path.join(tmp, "file")
        open(blocker, "w").close()
        bad_env = dict(env, ORK_CACHE_DIR=os.path.join(blocker, "cache"))
        rc, out6, err = run(ork, gen, bad_env)
        check(rc == 0 and "warning" in err and out6 == out1, "an unwritable cache is a warning, not a failure", err)

        # A killed conversion: the conversion is made in memory, so ork
        # killed while converting leaves nothing at all; the writer killed
        # while saving leaves only its temporary, which no run trusts. Either
        # way the next run converts again.
        big = os.path.join(tmp, "big.gguf")
        rc, _, err = run(ork, ["synth", "--n-embd", "768", "--layers", "6", "--n-ff", "3072", "--vocab", "8192",
                               "--type", "Q4_0", "-o", big], env)
        check(rc == 0, "synth a Q4_0 model", err)
        identity = [0]

        def new_identity():
            identity[0] += 1
            os.utime(big, (time.time() + identity[0], time.time() + identity[0]))

        def trusted():
            return [e for e in entries(cache) if e.endswith(".orkpack") and not e.startswith(".")]

        new_identity()
        p = subprocess.Popen([ork, "run", "-m", big, "-n", "1"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        if p.returncode == -signal.SIGKILL:
            wait_for_writer(cache)
            check(trusted() == [] or len(trusted()) == 1, "ork killed while converting: %s" % entries(cache))
        run(ork, ["cache", "rm"], env)

        caught = 0
        for attempt in range(8):
            new_identity()
            # stdout a pipe, as in out=$(ork run ...): the writer must not hold it.
            p = subprocess.Popen([ork, "run", "-m", big, "-n", "1"], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
            deadline = time.time() + 60
            killed = False
            while time.time() < deadline and not killed:
                temps = [e for e in entries(cache) if ".orkpack.ork-" in e]
                if temps:
                    # The writer itself: neither ork nor the short-lived fork between them.
                    writers = [h for h in holders_of(os.path.join(cache, temps[0]))
                               if h != p.pid and parent_of(h) != p.pid]
                    if writers:
                        pid = writers[0]
                        check(holds_only(pid, os.path.join(cache, temps[0])),
                              "the writer holds nothing of ork's but its temporary (no pipe, no socket)")
                        try:
                            os.kill(pid, signal.SIGKILL)
                            killed = True
                        except ProcessLookupError:
                            pass
                elif trusted():
                    break  # it finished first
                time.sleep(0.0005)
            p.communicate(timeout=60)
            check(p.returncode == 0, "ork itself runs on while its writer dies (rc %s)" % p.returncode)
            if killed:
                time.sleep(0.2)
                # (Killing the short-lived process between ork and the writer
                # stops the save before it starts: ork removes the temporary.)
                if trusted() == [] and any(".orkpack.ork-" in e for e in entries(cache)):
                    caught += 1
                    rc, out, err = run(ork, ["cache", "ls"], env)
                    check(rc == 0 and "partial conversion" in out, "cache ls shows what the writer left", out)
                    rc, _, err = run(ork, ["run", "-m", big, "-n", "1"], env)
                    check(rc == 0 and "converting" in err, "the next run converts again", err)
                    wait_for_writer(cache)
            run(ork, ["cache", "rm"], env)
            if caught >= 2:
                break
        check(caught >= 1, "caught the writer mid-write (%d of %d tries)" % (caught, attempt + 1))
        # What a kill leaves behind is named by `cache ls` and removed by `cache rm`.
        open(os.path.join(cache, ".x.orkpack.ork-AbCdEf"), "w").close()
        rc, out, err = run(ork, ["cache", "ls"], env)
        check(rc == 0 and "partial conversion" in out, "cache ls shows what was left", out)
        rc, out, err = run(ork, ["cache", "rm"], env)
        check(rc == 0 and entries(cache) == [], "and cache rm clears it", err)

        # Room: a stale entry (its source changed) goes at the next conversion; past
        # ORK_CACHE_MAX the least recently used goes; no room at all keeps nothing.
        room = os.path.join(tmp, "room-cache")
        renv = dict(env, ORK_CACHE_DIR=room)
        copies = {}
        for name in ("a", "b", "c"):
            copies[name] = os.path.join(tmp, name + ".gguf")
            with open(src, "rb") as f, open(copies[name], "wb") as g:
                g.write(f.read())

        def packs():
            return sorted(e for e in entries(room) if e.endswith(".orkpack") and not e.startswith("."))

        def gen_of(name):
            return ["run", "-m", copies[name], "-p", "hello", "-n", "8", "--temp", "0"]

        rc, a1, err = run(ork, gen_of("a"), renv)
        wait_for_writer(room)
        check(rc == 0 and len(packs()) == 1 and a1 == out1, "a copy converts and is kept", err)
        first = packs()[0]
        os.utime(copies["a"], (time.time() + 5, time.time() + 5))
        rc, out, err = run(ork, ["cache", "ls"], renv)
        check(rc == 0 and "stale: its source changed or is gone" in out, "cache ls names an entry whose source changed stale", out)
        rc, _, err = run(ork, gen_of("a"), renv)
        wait_for_writer(room)
        check(rc == 0 and "removed %s" % first in err and "its source changed or is gone" in err
              and len(packs()) == 1 and packs()[0] != first, "the next conversion removes the stale entry", err)
        entry_a = packs()[0]
        rc, _, err = run(ork, gen_of("b"), renv)
        wait_for_writer(room)
        entry_b = [e for e in packs() if e != entry_a][0]
        rc, _, err = run(ork, gen_of("a"), renv)  # a is now the more recently used
        check(rc == 0 and "converted copy" in err, "a runs from its entry", err)
        size = os.path.getsize(os.path.join(room, entry_a))
        rc, c1, err = run(ork, gen_of("c"), dict(renv, ORK_CACHE_MAX="%dK" % (size * 5 // 2 // 1024)))
        wait_for_writer(room)
        check(rc == 0 and c1 == out1 and "removed %s" % entry_b in err and "least recently used" in err
              and entry_a in packs() and entry_b not in packs() and len(packs()) == 2,
              "past ORK_CACHE_MAX the least recently used entry goes (b, not a)", err)
        before = packs()
        os.utime(copies["b"], (time.time() + 9, time.time() + 9))  # b's next run converts again
        for limit in (dict(ORK_CACHE_MAX="%dK" % (size // 2 // 1024)), dict(ORK_CACHE_MIN_FREE="100T")):
            rc, b2, err = run(ork, gen_of("b"), dict(renv, **limit))
            wait_for_writer(room)
            check(rc == 0 and b2 == out1 and "will not be kept: no room in the cache" in err and packs() == before,
                  "no room even without the others (%s): it runs, nothing kept, nothing removed" % limit, err)
        rc, _, err = run(ork, gen_of("b"), dict(renv, ORK_CACHE_MAX="lots"))
        check(rc != 0 and "ORK_CACHE_MAX=lots: expected a size" in err and packs() == before,
              "a malformed ORK_CACHE_MAX is an error naming it", err)

        # A float GGUF with --npu is packed for that device once, an entry per profile;
        # without --npu it runs as it is.
        fl = os.path.join(td, "models/tinystories656K-f32.gguf")
        if os.path.exists(fl):
            npu_cache = os.path.join(tmp, "npu-cache")
            env = dict(env, ORK_CACHE_DIR=npu_cache)
            gen = ["run", "-m", fl, "-p", "hello", "-n", "4", "--temp", "0", "--stats"]
            rc, o1, err = run(ork, gen + ["--npu", "vnpu:rk3588"], env)
            check(rc == 0 and "for rk3588's NPU" in err and "once: kept as" in err and "(0 refused by the NPU" in err,
                  "a float GGUF with --npu is packed for the device and kept", err)
            wait_for_writer(npu_cache)
            kept = [e for e in entries(npu_cache) if e.endswith(".orkpack")]
            check(len(kept) == 1 and "-rk3588-" in kept[0], "one entry, named for the profile: %s" % entries(npu_cache))
            rc, o2, err = run(ork, gen + ["--npu", "vnpu:rk3588"], env)
            check(rc == 0 and "runs from its converted copy" in err and "NPU at" not in err and o2 == o1,
                  "the second start opens it and writes the same text", err)
            rc, _, err = run(ork, gen, env)
            check(rc == 0 and "NPU at" not in err and "converted copy" not in err, "without --npu it runs as it is", err)
            rc, _, err = run(ork, gen + ["--npu", "vnpu:hexagon-v75"], env)
            wait_for_writer(npu_cache)
            check(rc == 0 and "for hexagon-v75's NPU" in err and len([e for e in entries(npu_cache) if e.endswith(".orkpack")]) == 2,
                  "another profile, another entry", err)
    print("PASS convert_cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
