#!/usr/bin/env python3
"""What scripts/sanitize.sh's ctest run left out: the listed tests that did not run and the tests
that skipped, each with the reasons its skipped cases gave ("zero: skipped SUITE.CASE: REASON",
tests/common/skip_status.h; read from ctest's JUnit report, which keeps a skipped test's output).
A skip is allowed when the test is named in ALLOWED (NAME=REGEX) and every reason it gave matches
REGEX. Under CI (third argument "true") a listed test that did not run or a skip not allowed exits
1; elsewhere they are printed only.

    sanitize_skips.py JUNIT KIND CI "TEST TEST ..." [NAME=REGEX ...]
"""
import re
import sys
import xml.etree.ElementTree as ElementTree

REASON = re.compile(r"^zero: skipped [^ ]+: (.*)$", re.MULTILINE)


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    junit, kind, ci, listed = sys.argv[1], sys.argv[2], sys.argv[3] == "true", sys.argv[4].split()
    allowed = dict(entry.split("=", 1) for entry in sys.argv[5:])
    ran, skipped = set(), {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        ran.add(case.get("name"))
        if case.find("skipped") is not None:
            output = case.findtext("system-out") or ""
            skipped[case.get("name")] = REASON.findall(output)
    problems = []
    for name in listed:
        if name not in ran:
            problems.append(f"{name} did not run (no such test in this configuration)")
    for name, reasons in sorted(skipped.items()):
        pattern = allowed.get(name)
        shown = "; ".join(sorted(set(reasons))) or "no reason printed"
        if pattern is not None and reasons and all(re.search(pattern, r) for r in reasons):
            print(f"sanitize.sh {kind}: {name} skipped, allowed ({shown})")
        else:
            problems.append(f"{name} skipped: {shown}" +
                            ("" if pattern is None else f" (allowed only for '{pattern}')"))
    for problem in problems:
        print(f"sanitize.sh {kind}: {problem}")
    if problems and ci:
        print(f"sanitize.sh {kind}: FAILED: under CI every listed test runs, and a test skips only "
              f"for the reason allowed_skips gives it (scripts/sanitize.sh)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
