#!/usr/bin/env python3
"""Reproducibility as a tested property: the same command gives the same
answer, bit for bit, run after run, and whatever the thread count.

Each case runs its command in two (or more) fresh scratch directories with
the variants it lists, and compares what it names: stdout, a line of
stderr, and output files byte for byte. A case may also require a pattern
(the expected answer) in the first run's output.

Usage: repro.py --ork BIN --testdata DIR --case NAME   (ctest runs each)
       repro.py --ork BIN --testdata DIR --all
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
TIMEOUT = 300

# name: (command with {ork} {td} {dir}; variants substituted for {v}; outputs
# compared; stderr lines compared (regex); a pattern the output must hold)
CASES = {
    # tinystories656K has no byte tokens: the text is filtered to what its
    # vocabulary spells, which once read freed memory (issue 22's first
    # finding). Same deletions, same PPL, every run.
    "ppl_byteless_vocab": (
        "{ork} ppl -m {td}/models/tinystories656K-f32.gguf -f {td}/corpus/wikitext2-test.txt -c 64 --chunks 6 {v}",
        ["", "", "-t 1"], [], [r"deleted \d+ of \d+ characters"],
        r"deleted 14548 of 1285622 characters it cannot spell"),
    "ppl_moe": (
        "{ork} ppl -m {td}/models/sotu-moe-f32.gguf -f {td}/corpus/wikitext2-test.txt -c 64 --chunks 4 {v}",
        ["", ""], [], [r"deleted \d+ of \d+ characters"], r"PPL"),
    "imatrix": (
        "{ork} imatrix -m {td}/models/tinystories656K-f32.gguf -f {td}/corpus/sotu-calibration.txt -c 64 --chunks 8 "
        "-o out.imatrix {v}",
        ["", ""], ["out.imatrix"], [], r"wrote"),
    "pack_threads": (
        "{ork} pack {td}/models/tinystories656K-f32.gguf -o out.orkpack --bpw 4.5 {v}",
        ["-t 1", "-t 2", "-t 2"], ["out.orkpack", "out.orkpack.tiers"], [], r"bits per weight"),
    "pack_moe_threads": (
        "{ork} pack {td}/models/sotu-moe-f32.gguf -o out.orkpack --uniform i8s --calib-chunks 8 {v}",
        ["-t 1", "-t 2"], ["out.orkpack"], [], r"bits per weight"),
    "pack_calibrated": (
        "{ork} pack {td}/models/tinystories656K-f32.gguf -o out.orkpack --calib {td}/corpus/sotu-calibration.txt "
        "--calib-chunks 8 --calib-ctx 64 {v}",
        ["-t 1", "-t 2"], ["out.orkpack"], [], r"bits per weight"),
    "run_greedy": (
        "{ork} run -m {td}/models/tinystories656K-f32.gguf -p 'Once upon a time' -n 48 --temp 0 {v}",
        ["-t 2", "-t 2", "-t 1"], [], [], r"Once upon a time"),
    "run_greedy_moe": (
        "{ork} run -m {td}/models/sotu-moe-f32.gguf -p 'The state of the union' -n 32 --temp 0 {v}",
        ["-t 2", "-t 1"], [], [], r"The state of the union"),
    "run_seeded_sampling": (
        "{ork} run -m {td}/models/stories260K-f32.gguf -n 48 --temp 0.9 --seed 7 {v}",
        ["-t 2", "-t 1"], [], [], r"."),
}


def run_once(command, d):
    p = subprocess.run(command, shell=True, cwd=d, capture_output=True, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", errors="replace")


def check(name, ork, td):
    command, variants, outputs, stderr_lines, expect = CASES[name]
    for needed in re.findall(r"\{td\}/([^ ]+)", command):
        if not os.path.exists(os.path.join(td, needed)):
            print("SKIPPED %s: test data missing: %s" % (name, needed))
            return SKIP
    runs = []
    for v in variants:
        with tempfile.TemporaryDirectory(prefix="ork-repro-") as d:
            cmd = command.format(ork=ork, td=td, dir=d, v=v)
            rc, out, err = run_once(cmd, d)
            if rc != 0:
                print("FAIL %s: exit code %d\n--- %s\n%s" % (name, rc, cmd, err[-2000:]))
                return 1
            files = {f: open(os.path.join(d, f), "rb").read() for f in outputs}
            lines = [m.group(0) for pattern in stderr_lines for m in [re.search(pattern, err)] if m]
            runs.append((v, cmd, out, files, lines, err))
    first = runs[0]
    if expect and not re.search(expect, first[2].decode("utf-8", errors="replace") + first[5]):
        print("FAIL %s: /%s/ not in the output of %s\n%s" % (name, expect, first[1], first[5][-2000:]))
        return 1
    for v, cmd, out, files, lines, _ in runs[1:]:
        if out != first[2]:
            print("FAIL %s: stdout differs between '%s' and '%s'\n--- first:\n%s\n--- then:\n%s" %
                  (name, first[0], v, first[2][-1500:].decode(errors="replace"), out[-1500:].decode(errors="replace")))
            return 1
        for f in outputs:
            if files[f] != first[3][f]:
                print("FAIL %s: %s differs between '%s' and '%s'" % (name, f, first[0], v))
                return 1
        if lines != first[4]:
            print("FAIL %s: stderr %s vs %s" % (name, first[4], lines))
            return 1
    print("ok   %s: %d runs (%s) identical" % (name, len(runs), ", ".join(repr(r[0]) for r in runs)))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ork", required=True)
    ap.add_argument("--testdata", required=True)
    ap.add_argument("--case")
    ap.add_argument("--all", action="store_true")
    a = ap.parse_args()
    names = list(CASES) if a.all else [a.case]
    worst = 0
    for n in names:
        if n not in CASES:
            print("no case named", n)
            return 1
        r = check(n, os.path.abspath(a.ork), os.path.abspath(a.testdata))
        if r == 1 or (r == SKIP and not a.all):
            worst = r
    return worst


if __name__ == "__main__":
    sys.exit(main())
