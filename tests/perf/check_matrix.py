#!/usr/bin/env python3
"""check_matrix.py FILE NAME N COUNT: FILE (kolo-perf p2p's output) holds
COUNT matrices whose rows and columns are NAME0 .. NAME{N-1}, every
off-diagonal cell a positive number and every diagonal cell '-' (host
ranks) or a positive number (GPUs: a copy within the device).  Exit 0, or
1 saying what is wrong."""
import sys


def matrices(lines, name):
    """Each matrix: (its title, its rows of cells), header and all."""
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("#  src\\dst"):
            cols = lines[i].split()[2:]
            rows = []
            i += 1
            while i < len(lines) and lines[i].split() and lines[i].split()[0].startswith(name):
                rows.append(lines[i].split())
                i += 1
            out.append((lines[i - len(rows) - 2].strip(), cols, rows))
        else:
            i += 1
    return out


def check(path, name, n, count):
    got = matrices(open(path).read().splitlines(), name)
    if len(got) != count:
        return [f"{len(got)} matrices of {name}s, not {count}"]
    errs = []
    want = [f"{name}{k}" for k in range(n)]
    for title, cols, rows in got:
        if cols != want or [r[0] for r in rows] != want:
            errs.append(f"'{title}': rows {[r[0] for r in rows]} / columns {cols}, not {want}")
            continue
        for i, r in enumerate(rows):
            for j, cell in enumerate(r[1:]):
                if i == j and cell == "-":
                    continue
                try:
                    ok = float(cell) > 0
                except ValueError:
                    ok = False
                if not ok:
                    errs.append(f"'{title}': {name}{i} -> {name}{j} is '{cell}', not a positive figure")
    return errs


if __name__ == "__main__":
    path, name, n, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    errs = check(path, name, n, count)
    for e in errs:
        print(f"{path}: {e}", file=sys.stderr)
    if not errs:
        print(f"{path}: {count} full {n} x {n} matrices of {name}s")
    sys.exit(1 if errs else 0)
