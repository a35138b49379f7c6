#!/usr/bin/env python3
"""`ork template` end to end on every reference case of
../shared/testdata/templates: each case's template file, conversation and
variables go through the command as a user would pass them, and its output
must be the expected rendering byte for byte (or, for an expected error, a
failure with exit code 1 and a message on stderr, nothing on stdout).

Usage: template_cases.py --ork BIN --testdata DIR
Exit 77 (skipped) when the test data is missing."""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

SKIP = 77


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ork", required=True)
    ap.add_argument("--testdata", required=True)
    a = ap.parse_args()
    root = os.path.join(a.testdata, "templates")
    table = os.path.join(root, "cases.tsv")
    if not os.path.exists(table):
        print(f"SKIPPED: test data missing: {table} (set ORK_TESTDATA)")
        return SKIP
    with open(table, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for row in rows:
            name = f"{row['template']}__{row['case']}"
            vars_path = os.path.join(tmp, "vars.json")
            with open(vars_path, "w", encoding="utf-8") as v:
                v.write(row["vars"])
            cmd = [a.ork, "template", os.path.join(root, "templates", row["template"] + ".jinja"),
                   os.path.join(root, "conversations", row["conversation"] + ".json"),
                   "--vars", vars_path, "--date", "2026-01-15"]
            p = subprocess.run(cmd, capture_output=True, timeout=30)
            with open(os.path.join(root, row["expected_file"]), "rb") as e:
                expected = e.read()
            if row["outcome"] == "text":
                if p.returncode != 0 or p.stdout != expected:
                    failures.append(f"{name}: rc {p.returncode}, {len(p.stdout)} bytes vs {len(expected)} expected; "
                                    f"stderr: {p.stderr.decode(errors='replace')[:300]}")
            elif p.returncode != 1 or p.stdout or not p.stderr.strip():
                failures.append(f"{name}: expected an error, got rc {p.returncode} with {len(p.stdout)} bytes")
    for f in failures:
        print("FAIL", f)
    print(f"{len(rows) - len(failures)} of {len(rows)} cases as the reference")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
