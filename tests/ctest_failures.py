#!/usr/bin/env python3
"""ctest_failures.py - what each failed case of a ctest run printed, in short.

  ctest_failures.py JUNIT [WHERE]

JUNIT is a ctest run's report (ctest --output-junit); WHERE names the run
in each line (a build dir).  For every case that failed: its name, then the
lines from its first GoogleTest failure on (or, with none, the last lines it
printed), at most MAX_LINES of them, each line cut at MAX_COLS.  CI keeps
only the end of a run's log, and the step that failed is far above it: run
by tests/run_all.sh so that the summary at the end says what went wrong.
Exit 2 on an unreadable report.
"""
import sys
import xml.etree.ElementTree as ET

MAX_LINES = 24
MAX_COLS = 300
MAX_CASES = 4


def failed_cases(root):
    """(name, output text) of each failed testcase."""
    for case in root.iter("testcase"):
        failed = case.get("status") == "fail" or case.find("failure") is not None
        if failed:
            out = case.find("system-out")
            yield case.get("name", "?"), (out.text or "") if out is not None else ""


def digest(text):
    """The lines that say why: from the first failure on, else the last."""
    lines = text.splitlines()
    first = next((i for i, l in enumerate(lines) if "Failure" in l or "FAILED" in l), None)
    lines = lines[first:first + MAX_LINES] if first is not None else lines[-MAX_LINES:]
    return [l if len(l) <= MAX_COLS else l[:MAX_COLS] + " ..." for l in lines]


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    where = argv[2] if len(argv) == 3 else argv[1]
    try:
        root = ET.parse(argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"ctest_failures: {argv[1]}: {e}", file=sys.stderr)
        return 2
    cases = list(failed_cases(root))
    for name, text in cases[:MAX_CASES]:
        print(f"--- {where}: {name} failed; it printed:")
        for line in digest(text) or ["(nothing)"]:
            print(f"    {line}")
    if len(cases) > MAX_CASES:
        print(f"--- {where}: {len(cases) - MAX_CASES} more failed case(s): the step's log above has them")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
