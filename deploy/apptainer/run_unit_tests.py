#!/usr/bin/env python3
"""Runs the unit tests of a medprof build from `ctest --show-only=json-v1` output, without ctest.

The Apptainer images' %test section uses it: the image is read-only there, and ctest writes
Testing/ into the build tree. Each test runs with its CTest ENVIRONMENT and TIMEOUT properties in
a fresh temporary working directory. Exit status: 0 when every test passed, 1 otherwise.

    run_unit_tests.py unit-tests.json      (made with: ctest -L unit --show-only=json-v1)
"""
import json
import os
import subprocess
import sys
import tempfile


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        tests = json.load(f).get("tests", [])
    if not tests:
        print(f"run_unit_tests.py: no tests in {argv[1]}", file=sys.stderr)
        return 1
    failed = []
    for t in tests:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        env = dict(os.environ)
        for kv in props.get("ENVIRONMENT", []):
            key, _, value = kv.partition("=")
            env[key] = value
        timeout = float(props.get("TIMEOUT", 600))
        with tempfile.TemporaryDirectory(prefix="medprof-test-") as cwd:
            env["TMPDIR"] = cwd
            try:
                rc = subprocess.run(t["command"], cwd=cwd, env=env, timeout=timeout,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, check=False)
                ok, out = rc.returncode == 0, rc.stdout
            except subprocess.TimeoutExpired as e:
                ok, out = False, f"timed out after {timeout:.0f} s\n{e.stdout or ''}"
        print(f"{'ok  ' if ok else 'FAIL'} {t['name']}")
        if not ok:
            failed.append(t["name"])
            print(out[-4000:])
    print(f"{len(tests) - len(failed)}/{len(tests)} unit tests passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
