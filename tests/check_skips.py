#!/usr/bin/env python3
"""check_skips.py - every skip of a CI step is listed in tests/expected_skips.txt.

  check_skips.py ctest WHERE JUNIT    a ctest run's cases (ctest --output-junit)
  check_skips.py log WHERE LOGFILE    the "SKIP: ..." lines a script step printed

WHERE names the place in the list (a build dir, or a script step).  Exit 1,
naming each, on a skip the list does not expect there (ctest's skipped and
disabled cases alike: neither ran); exit 2 on an unreadable list or report.
A line for WHERE that matched no skip is named as stale (for ctest, a line
whose cases all ran; lines for cases this run did not have are left alone)
but does not fail: a machine with what CI's lacks (a GPU, netem) runs what
the line expects to skip, and that is no defect.  Run by tests/run_all.sh.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

LIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected_skips.txt")


def load(where):
    """The list's (line number, compiled pattern, reason) for WHERE."""
    entries = []
    with open(LIST, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            fields = line.split(None, 2)
            if not fields or fields[0].startswith("#"):
                continue
            if len(fields) < 3:
                sys.exit(f"check_skips: {LIST}:{no}: want WHERE PATTERN REASON")
            if where in fields[0].split(","):
                try:
                    entries.append((no, re.compile(f"(?:{fields[1]})(?: |$)"), fields[2].strip()))
                except re.error as e:
                    sys.exit(f"check_skips: {LIST}:{no}: {fields[1]}: {e}")
    return entries


def ctest_skips(junit):
    """(name, why) of each case ctest did not run, and every case's name."""
    root = ET.parse(junit).getroot()
    out, names = [], [case.get("name") for case in root.iter("testcase")]
    for case in root.iter("testcase"):
        status = case.get("status")
        if status in ("notrun", "disabled"):
            text = (case.findtext("system-out") or "").strip().splitlines()
            mark = case.find("skipped")
            said = mark.get("message") if mark is not None else status
            why = next((t for t in reversed(text) if "SKIP" in t), said)
            out.append((case.get("name"), why.strip()))
    return out, names


def log_skips(path):
    """(text after "SKIP: ", the line) of each SKIP line a step printed; None:
    every line listed for the step must match one."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return [(line[line.index("SKIP: ") + 6:].rstrip(), line.strip()) for line in f if "SKIP: " in line], None


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("ctest", "log"):
        sys.exit(__doc__)
    kind, where, report = sys.argv[1:]
    entries = load(where)
    skips, names = ctest_skips(report) if kind == "ctest" else log_skips(report)
    # A line none of whose cases this run had (a narrower -R, a build
    # without those binaries) says nothing here.
    if names is not None:
        entries = [e for e in entries if any(e[1].match(n) for n in names)]
    used, bad = set(), 0
    for name, why in skips:
        hit = next((e for e in entries if e[1].match(name)), None)
        if hit is None:
            print(f"check_skips: UNEXPECTED SKIP in {where}: {name}: {why[:300]}")
            bad = 1
        else:
            used.add(hit[0])
    for no, pattern, reason in entries:
        if no not in used:
            ran = " though its cases ran" if names is not None else ""
            print(f"check_skips: note: expected_skips.txt:{no} ({where}) matched no skip{ran}: the skip it "
                  f"lists ({reason}) did not happen on this machine; where it no longer happens anywhere, "
                  f"drop or narrow the line")
    state = "FAILED" if bad else "all expected"
    print(f"check_skips: {where}: {len(skips)} skipped, {len(used)} of {len(entries)} listed reasons seen: {state}")
    return bad


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ET.ParseError) as e:
        print(f"check_skips: {e}")
        sys.exit(2)
