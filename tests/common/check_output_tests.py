#!/usr/bin/env python3
"""Fails on a test that ctest would pass whatever its exit status: PASS_REGULAR_EXPRESSION makes
ctest ignore the status, WILL_FAIL passes any non-zero one (a crash too). A test that passes on
its output must run under tests/common/expect_exit.sh (zero_add_output_test in
cmake/ZeroTesting.cmake), its one regex ending in that script's line for the code its command
gives. Reads ctest's own listing of the build.

    check_output_tests.py CTEST BUILD_DIR
"""
import json
import re
import subprocess
import sys

MARKER = re.compile(r"expect_exit: exit status ([0-9]+) as expected$")


def problems(test):
    properties = {p["name"]: p["value"] for p in test.get("properties", [])}
    name = test["name"]
    if properties.get("WILL_FAIL"):
        yield f"{name}: WILL_FAIL passes on any non-zero exit, a crash too (use zero_add_output_test)"
    pass_regexes = properties.get("PASS_REGULAR_EXPRESSION")
    if not pass_regexes:
        return
    if isinstance(pass_regexes, str):
        pass_regexes = [pass_regexes]
    match = MARKER.search(pass_regexes[-1])
    command = test.get("command", [])
    wrapped = len(command) > 2 and command[1].endswith("tests/common/expect_exit.sh")
    if len(pass_regexes) != 1 or match is None or not wrapped:
        yield (f"{name}: passes on its output but ignores its exit status (register it with "
               f"zero_add_output_test, cmake/ZeroTesting.cmake)")
    elif command[2] != match.group(1):
        yield f"{name}: expect_exit.sh checks exit {command[2]}, the regex {match.group(1)}"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    listing = subprocess.run([sys.argv[1], "--show-only=json-v1"], cwd=sys.argv[2],
                             capture_output=True, text=True, check=True).stdout
    tests = json.loads(listing)["tests"]
    found = [problem for test in tests for problem in problems(test)]
    for problem in found:
        print(problem)
    if found:
        sys.exit(f"check_output_tests: {len(found)} test(s) would pass whatever their exit status")
    wrapped = sum(1 for test in tests
                  if any(p["name"] == "PASS_REGULAR_EXPRESSION" for p in test.get("properties", [])))
    print(f"check_output_tests: {len(tests)} tests, {wrapped} pass on their output and exit status")


if __name__ == "__main__":
    main()
