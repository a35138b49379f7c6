#!/usr/bin/env python3
"""Hostile invocations of the ork CLI, one row of hostile.tsv per run.

Each row runs in a scratch directory of its own holding copies of the inputs
it names, under a 20 s timeout, and must:
  - end with the expected exit code (never a signal, never a hang),
  - print the expected message (a regular expression, searched in stdout
    and stderr together),
  - leave no new file in the scratch directory when it fails (no output
    under its final name, no temporary),
  - leave every input byte for byte as it was.

Placeholders in a command: {ork} the binary; {s260} {ts656} {sotu} copies
of the real models; {dir} the scratch directory; other {name} inputs are
made by the functions in MAKERS (a corrupted copy, an orkpack, ...).
A row whose "rc" is "kill:SECONDS" is sent SIGTERM after that long ("kill:temp":
as soon as the output's temporary file exists) and must then have died of
it, leaving no file behind.

Usage: hostile.py --ork BIN --testdata DIR --row NAME   (one row; ctest runs each)
       hostile.py --ork BIN --testdata DIR --all
"""
import argparse
import hashlib
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cgroup  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 20
SKIP = 77  # ctest's SKIP_RETURN_CODE for this suite

MODELS = {
    "s260": "models/stories260K-f32.gguf",
    "ts656": "models/tinystories656K-f32.gguf",
    "sotu": "models/sotu-moe-f32.gguf",
    "q3ks": "fixtures/quant/model-Q3_K_S.gguf",
}


# --- a minimal GGUF reader: enough to find a key's value or a tensor's bytes ---

def _gguf_layout(data):
    """Returns (kv: {key: (value_offset, type)}, tensors: {name: (name_offset, data_offset, dims, type)})."""
    assert data[:4] == b"GGUF"
    pos = 8
    n_tensors, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(p, t):
        if t in sizes:
            return p + sizes[t]
        if t == 8:
            (n,) = struct.unpack_from("<Q", data, p)
            return p + 8 + n
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, p)
            p += 12
            for _ in range(n):
                p = skip_value(p, et)
            return p
        raise ValueError(t)

    kv = {}
    for _ in range(n_kv):
        (klen,) = struct.unpack_from("<Q", data, pos)
        key = data[pos + 8:pos + 8 + klen].decode()
        pos += 8 + klen
        (t,) = struct.unpack_from("<I", data, pos)
        pos += 4
        kv[key] = (pos, t)
        pos = skip_value(pos, t)
    alignment = 32
    if "general.alignment" in kv:
        alignment = struct.unpack_from("<I", data, kv["general.alignment"][0])[0]
    infos = []
    for _ in range(n_tensors):
        (nlen,) = struct.unpack_from("<Q", data, pos)
        name_at = pos + 8
        name = data[name_at:name_at + nlen].decode(errors="replace")
        pos = name_at + nlen
        (nd,) = struct.unpack_from("<I", data, pos)
        dims = struct.unpack_from("<%dQ" % nd, data, pos + 4)
        pos += 4 + 8 * nd
        t, off = struct.unpack_from("<IQ", data, pos)
        pos += 12
        infos.append((name, name_at, dims, t, off))
    data_start = (pos + alignment - 1) // alignment * alignment
    tensors = {name: (name_at, data_start + off, dims, t) for name, name_at, dims, t, off in infos}
    return kv, tensors


def set_u32(path, key, value):
    data = bytearray(open(path, "rb").read())
    kv, _ = _gguf_layout(data)
    at, t = kv[key]
    assert t == 4, (key, t)  # UINT32
    struct.pack_into("<I", data, at, value)
    open(path, "wb").write(data)


def poison_f32(path, tensor, index, value):
    data = bytearray(open(path, "rb").read())
    _, tensors = _gguf_layout(data)
    _, at, _, t = tensors[tensor]
    assert t == 0, (tensor, t)  # F32
    struct.pack_into("<f", data, at + 4 * index, value)
    open(path, "wb").write(data)


def rename_tensor_byte(path, tensor, i, byte):
    data = bytearray(open(path, "rb").read())
    _, tensors = _gguf_layout(data)
    data[tensors[tensor][0] + i] = byte
    open(path, "wb").write(data)


def _orkpack_entries(data):
    """Yields (name, tier, dims, data_offset, scales_offset, scales_size) of every directory entry, offsets absolute."""
    dir_off, _, data_off = struct.unpack_from("<QQQ", data, 32)
    pos = dir_off
    (count,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    for _ in range(count):
        (nlen,) = struct.unpack_from("<Q", data, pos)
        name = data[pos + 8:pos + 8 + nlen].decode()
        pos += 8 + nlen
        tier, _layout, nd = struct.unpack_from("<III", data, pos)
        dims = struct.unpack_from("<%dQ" % nd, data, pos + 12)
        pos += 12 + 8 * nd + 8 + 8
        doff, _dsize, soff, ssize = struct.unpack_from("<QQQQ", data, pos)
        pos += 32 + 4
        yield name, tier, dims, data_off + doff, data_off + soff, ssize


def orkpack_poison_scale(path, tensor, value):
    data = bytearray(open(path, "rb").read())
    for name, _tier, dims, _at, scales_at, ssize in _orkpack_entries(data):
        if name == tensor:
            assert ssize > 0
            rows = 1
            for d in dims[1:]:
                rows *= d
            # Version 2 keeps a tensor's scales in f16 (rows x 2 bytes) where they all are f16 values.
            struct.pack_into("<e" if ssize == 2 * rows else "<f", data, scales_at, value)
            open(path, "wb").write(data)
            return
    raise KeyError(tensor)


def orkpack_poison_q3k_subscale(path, tensor, value):
    """Sets the first sub-scale of row 0's first q3k header (after the row's bit plane)."""
    data = bytearray(open(path, "rb").read())
    for name, tier, dims, at, _scales_at, _ssize in _orkpack_entries(data):
        if name == tensor:
            assert tier == 19, (tensor, tier)  # q3k
            k = dims[0]
            rows = 1
            for n in dims[1:]:
                rows *= n
            struct.pack_into("<b", data, at + rows * k // 4 + k // 8 + 2, value)
            open(path, "wb").write(data)
            return
    raise KeyError(tensor)


# --- inputs a row can name: made in the scratch directory before it runs ---

def run_ork(args, ork, cwd):
    subprocess.run([ork] + args, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=120)


def make_blocks_short(d, ork):
    p = os.path.join(d, "short_blocks.gguf")
    shutil.copy(os.path.join(d, "s260.gguf"), p)
    set_u32(p, "llama.block_count", 4)  # the file has 5 blocks
    return p


def make_nan_weight(d, ork):
    p = os.path.join(d, "nan_weight.gguf")
    shutil.copy(os.path.join(d, "s260.gguf"), p)
    poison_f32(p, "blk.2.attn_v.weight", 100, float("nan"))
    return p


def make_inf_norm(d, ork):
    p = os.path.join(d, "inf_norm.gguf")
    shutil.copy(os.path.join(d, "s260.gguf"), p)
    poison_f32(p, "blk.0.ffn_norm.weight", 3, float("inf"))
    return p


def make_escape_name(d, ork):
    p = os.path.join(d, "escape_name.gguf")
    shutil.copy(os.path.join(d, "s260.gguf"), p)
    rename_tensor_byte(p, "blk.1.attn_q.weight", 0, 0x1B)  # "\x1blk.1.attn_q.weight"
    return p


def make_i8_pack(d, ork):
    p = os.path.join(d, "i8.orkpack")
    run_ork(["pack", "--uniform", "i8", "s260.gguf", "-o", p], ork, d)
    os.remove(p + ".tiers")
    return p


def make_poisoned_pack(name, tier, tensor, value):
    def make(d, ork):
        p = os.path.join(d, name)
        run_ork(["pack", "--uniform", tier, "s260.gguf", "-o", p], ork, d)
        os.remove(p + ".tiers")
        orkpack_poison_scale(p, tensor, value)
        return p
    return make


def make_q3k_bad_subscale(d, ork):
    p = os.path.join(d, "q3k_bad.orkpack")
    run_ork(["pack", "q3ks.gguf", "-o", p], ork, d)
    if os.path.exists(p + ".tiers"):
        os.remove(p + ".tiers")
    orkpack_poison_q3k_subscale(p, "blk.0.ffn_down.weight", 40)
    return p


def make_s260_imatrix(d, ork):
    p = os.path.join(d, "s260.imatrix")
    with open(os.path.join(d, "calib.txt"), "w") as f:
        f.write("Once upon a time there was a little girl who liked to play in the park. " * 40)
    run_ork(["imatrix", "-m", "s260.gguf", "-f", "calib.txt", "-o", p, "-c", "32", "--chunks", "4"], ork, d)
    os.remove(os.path.join(d, "calib.txt"))
    return p


def make_text(d, ork):
    p = os.path.join(d, "text.txt")
    with open(p, "w") as f:
        f.write("The quick brown fox jumps over the lazy dog. " * 200)
    return p


def make_tiers(name, text):
    def make(d, ork):
        p = os.path.join(d, name)
        with open(p, "w") as f:
            f.write(text)
        return p
    return make


MAKERS = {
    "short_blocks": make_blocks_short,
    "nan_weight": make_nan_weight,
    "inf_norm": make_inf_norm,
    "escape_name": make_escape_name,
    "i8_pack": make_i8_pack,
    "nan_scale_pack": make_poisoned_pack("nan_scale.orkpack", "i8", "blk.3.ffn_up.weight", float("nan")),
    "inf_scale_pack": make_poisoned_pack("inf_scale.orkpack", "i4", "blk.0.attn_k.weight", float("-inf")),
    "s260_imatrix": make_s260_imatrix,
    "q3k_bad_subscale_pack": make_q3k_bad_subscale,
    "text": make_text,
    "unknown_tiers": make_tiers("unknown.tiers", "blk.0.attn_q.weight = i8\nblk.0.attn_qq.weight = i4\n"),
    "duplicate_tiers": make_tiers("duplicate.tiers", "blk.0.attn_q.weight = i8\n\nblk.0.attn_q.weight = i4\n"),
    "vector_tiers": make_tiers("vector.tiers", "# norms stay f32\nblk.0.attn_norm.weight = i4\n"),
    "bad_tier_tiers": make_tiers("bad_tier.tiers", "blk.0.attn_q.weight = i3\n"),
    "conv": make_tiers("conv.json", '[{"role": "user", "content": "Hi"}]'),
    "conv_bad_json": make_tiers("bad.json", '[{"role": "user", "content": "Hi"'),
    "conv_not_list": make_tiers("not_list.json", '{"messages": "Hi"}'),
    "tmpl_unclosed": make_tiers("unclosed.jinja", "{% for m in messages %}\n{{ m.content }}\n"),
    "tmpl_runaway": make_tiers("runaway.jinja", "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"),
    "tmpl_deep": make_tiers("deep.jinja", "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}"),
    "tmpl_raise": make_tiers("raise.jinja", "{{ raise_exception('Conversation roles must alternate') }}"),
}


# The models a maker reads beside s260 (copied in as <key>.gguf).
MAKER_MODELS = {"q3k_bad_subscale_pack": ("q3ks",)}


def read_table():
    rows = []
    with open(os.path.join(HERE, "hostile.tsv"), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            name, rc, needs, message, command = line.split("\t")
            rows.append({"name": name, "rc": rc, "needs": needs, "message": message, "command": command})
    return rows


def snapshot(d):
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, d)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


class Skip(Exception):
    pass


def memory_cgroup(limit_bytes):
    """A fresh memory cgroup with this limit; its directory and procs file, or Skip."""
    made = cgroup.memory_cgroup(limit_bytes, "hostile")
    if made is None:
        raise Skip("no writable memory cgroup (v1 /sys/fs/cgroup/memory or v2)")
    return made


def run_row(row, ork, testdata):
    with tempfile.TemporaryDirectory(prefix="ork-hostile-") as d:
        values = {"ork": ork, "dir": d}
        for key, rel in MODELS.items():
            src = os.path.join(testdata, rel)
            if "{%s}" % key in row["command"] or key == "s260" or key in MAKER_MODELS.get(row["needs"], ()):
                if not os.path.exists(src):
                    raise Skip("test data missing: " + src)
                dst = os.path.join(d, key + ".gguf")
                shutil.copy(src, dst)
                values[key] = dst
        for need in filter(None, row["needs"].split(",")):
            if need != "-":
                values[need] = MAKERS[need](d, ork)
        before = snapshot(d)
        command = row["command"].format(**values)
        cgroup_dir = None
        preexec = None
        if row["rc"].startswith("cgroup:"):
            limit_mib, rc = row["rc"][len("cgroup:"):].split(":")
            cgroup_dir, procs = memory_cgroup(int(limit_mib) << 20)

            def preexec():
                with open(procs, "w") as f:
                    f.write(str(os.getpid()))
            expected_rc = int(rc)
        elif row["rc"].startswith("kill:"):
            expected_rc = -signal.SIGTERM
        else:
            expected_rc = int(row["rc"])
        try:
            proc = subprocess.Popen(command, shell=True, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    preexec_fn=preexec, start_new_session=True)
            if row["rc"].startswith("kill:"):
                when = row["rc"][len("kill:"):]
                if when == "temp":
                    # As soon as the output's temporary exists: killed mid-write.
                    # The writer is stopped first and the temporary looked for
                    # again, so a run that finished between the look and the
                    # signal (a short write on a busy machine) cannot pass for
                    # one killed mid-write; SIGTERM is pending when it resumes.
                    deadline = time.time() + TIMEOUT
                    while time.time() < deadline and not any(".ork-" in f for f in os.listdir(d)):
                        time.sleep(0.001)
                    os.killpg(proc.pid, signal.SIGSTOP)
                    if not any(".ork-" in f for f in os.listdir(d)):
                        os.killpg(proc.pid, signal.SIGCONT)
                        proc.communicate(timeout=TIMEOUT)
                        return "the write ended before it could be stopped mid-way: make it longer"
                    os.killpg(proc.pid, signal.SIGTERM)
                    os.killpg(proc.pid, signal.SIGCONT)
                else:
                    time.sleep(float(when))
                    # The shell runs ork as its last command: signal the group.
                    os.killpg(proc.pid, signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                return "hung: no exit within %d s" % TIMEOUT
        finally:
            if cgroup_dir is not None:
                cgroup.remove(cgroup_dir)
        text = out.decode("utf-8", errors="replace")
        rc = proc.returncode
        # sh reports a signal as 128 + N; a sanitizer as its own exit code with a report.
        problems = []
        if rc != expected_rc and not (expected_rc < 0 and rc == 128 - expected_rc):
            if rc < 0 or rc > 128:
                problems.append("died of signal %d" % (-rc if rc < 0 else rc - 128))
            problems.append("exit code %d, expected %d" % (rc, expected_rc))
        if "ERROR: AddressSanitizer" in text or "runtime error:" in text:
            problems.append("sanitizer report")
        if row["message"] and not re.search(row["message"], text, re.S):
            problems.append("message /%s/ not found" % row["message"])
        if "\x1b" in text:
            problems.append("a raw escape byte reached the output")
        after = snapshot(d)
        for path, digest in before.items():
            if after.get(path) != digest:
                problems.append("input %s was %s" % (path, "modified" if path in after else "removed"))
        if expected_rc != 0:
            left = sorted(set(after) - set(before))
            if left:
                problems.append("files left behind after a failure: " + ", ".join(left))
        if problems:
            return "; ".join(problems) + "\n--- command: " + command + "\n--- output:\n" + text[-3000:]
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ork")
    ap.add_argument("--testdata")
    ap.add_argument("--row")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    rows = read_table()
    if a.list:
        print("\n".join(r["name"] for r in rows))
        return 0
    if not a.ork or not a.testdata:
        ap.error("--ork and --testdata are needed to run rows")
    chosen = [r for r in rows if a.all or r["name"] == a.row]
    if not chosen:
        print("no row named", a.row)
        return 1
    failed = 0
    for row in chosen:
        try:
            problem = run_row(row, os.path.abspath(a.ork), a.testdata)
        except Skip as e:
            print("SKIPPED %s: %s" % (row["name"], e))
            if not a.all:
                return SKIP
            continue
        if problem:
            failed += 1
            print("FAIL %s: %s" % (row["name"], problem))
        else:
            print("ok   %s" % row["name"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
