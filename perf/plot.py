#!/usr/bin/env python3
"""kolo-perf plot A.json [B.json ...] -o OUT.png: busbw (top) and time per
call (bottom, log) against size (log2) for each run, from kolo-perf --json
files (docs/perf-json.md); a run is named by its "label" (--label), else its
file name; a run whose JSON holds a ceiling (--ceiling) gets it as a dashed
line; -N's cycles are drawn as their median per size.  Drawn by gnuplot
(pngcairo, else png; Debian: gnuplot-nox) from a script written here."""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

SCHEMA_VERSION = 1  # PERF_JSON_SCHEMA_VERSION in perf/perf_report.h
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def fail(msg):
    print("kolo-perf plot: " + msg, file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except ValueError as e:
        fail(f"{path}: not valid JSON ({e}); a run that failed leaves its file unfinished")


def points(path, results, in_place):
    """(size, median busbw, median time) per size of one placement."""
    by_size = {}
    for i, r in enumerate(results):
        if not all(k in r for k in ("size", "busbw", "time_us", "in_place")):
            fail(f"{path}: results[{i}] lacks size, busbw, time_us or in_place (docs/perf-json.md)")
        if r["in_place"] == in_place:
            by_size.setdefault(r["size"], []).append(r)
    return [(s, statistics.median_high([r["busbw"] for r in rs]), statistics.median_high([r["time_us"] for r in rs]))
            for s, rs in sorted(by_size.items())]


def series(path, placements):
    """The runs of one file: dicts of label, points, ceiling, collective."""
    root = load(path)
    if not isinstance(root, dict) or root.get("schema") != "kolo-perf" or \
            not isinstance(root.get("schema_version"), int):
        fail(f'{path}: not a kolo-perf --json file of a known schema (no "schema": "kolo-perf" with a '
             '"schema_version"; docs/perf-json.md)')
    if root["schema_version"] > SCHEMA_VERSION:
        fail(f"{path}: schema_version {root['schema_version']} is newer than this plotter reads ({SCHEMA_VERSION})")
    if not root.get("results"):
        fail(f"{path}: no results (an empty run: nothing to draw)")
    name = root.get("label") or os.path.basename(path)
    both = len(placements) == 2
    ceiling = (root.get("ceiling") or {}).get("busbw") or 0
    coll = (root.get("config") or {}).get("collective", "?")
    out = []
    for in_place in placements:
        pts = points(path, root["results"], in_place)
        if pts:
            label = name + ("" if not both else " (in place)" if in_place else " (out of place)")
            out.append({"label": label, "pts": pts, "ceiling": ceiling, "collective": coll})
    if not out:
        which = "in-place" if placements == [True] else "out-of-place"
        fail(f"{path}: no {which} results (--placement {'out' if placements == [True] else 'in'} picks them)")
    return out


def quoted(s):
    return "'" + s.replace("'", "''") + "'"


def panel(runs, col, ceilings):
    parts = [f"$s{i} using 1:{col} with linespoints lt {i + 1} pt 7 ps 0.8 title {quoted(r['label'])}"
             for i, r in enumerate(runs)]
    if ceilings:
        parts += [f"{r['ceiling']:.6g} with lines lt {i + 1} dt 2 lw 2 title "
                  + quoted(f"ceiling of {r['label']}: {r['ceiling']:.2f} GB/s")
                  for i, r in enumerate(runs) if r["ceiling"] > 0]
    return "plot " + ", \\\n     ".join(parts) + "\n"


def script(runs, png, title):
    s = ["# kolo-perf plot: busbw and time per call against size (docs/perf-json.md)\n",
         "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
         "  set terminal pngcairo size 1100,1000 noenhanced font ',10'\n"
         "} else {\n  set terminal png size 1100,1000 noenhanced\n}\n",
         f"set output {quoted(png)}\n"]
    for i, r in enumerate(runs):
        s.append(f"# {r['label']}\n$s{i} << EOD\n")
        s += [f"{size} {bus:.6g} {t:.6g}\n" for size, bus, t in r["pts"]]
        s.append("EOD\n")
    s.append(f"set multiplot layout 2,1 title {quoted(title)}\n"
             "set logscale x 2\nset format x '%.0b%B'\nset xlabel 'size (bytes)'\nset grid\n"
             "set key below\nset ylabel 'busbw (GB/s, 1e9 B/s)'\nset yrange [0:*]\n")
    s.append(panel(runs, 2, True))
    s.append("set ylabel 'time per call (us)'\nset logscale y 10\nset yrange [*:*]\n")
    s.append(panel(runs, 3, False))
    s.append("unset multiplot\nset output\n")
    return "".join(s)


def draw(text, png, keep):
    path = keep
    if path is None:
        fd, path = tempfile.mkstemp(prefix="kolo-perf-plot.", suffix=".gp")
        os.close(fd)
    with open(path, "w") as f:
        f.write(text)
    try:
        rc = subprocess.run(["gnuplot", path]).returncode
    except FileNotFoundError:
        fail("gnuplot is not installed (Debian: apt-get install gnuplot-nox, which scripts/setup.sh does)")
    if rc != 0:
        fail(f"gnuplot failed (exit status {rc}) on {path}")
    if not os.path.isfile(png) or pathlib.Path(png).read_bytes()[:8] != PNG_SIGNATURE:
        fail(f"gnuplot wrote no PNG to {png}")
    if keep is None:
        os.unlink(path)


def main():
    p = argparse.ArgumentParser(prog="kolo-perf plot", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="A.json")
    p.add_argument("-o", "--output", required=True, help="the PNG to write")
    p.add_argument("--title", help="the figure's title (default: kolo-perf and the collectives)")
    p.add_argument("--placement", choices=("out", "in", "both"), default="out",
                   help="which results (default out: out of place)")
    p.add_argument("--script", help="keep the gnuplot script there (default: a temporary file)")
    a = p.parse_args()
    placements = {"out": [False], "in": [True], "both": [False, True]}[a.placement]
    runs = [r for f in a.files for r in series(f, placements)]
    title = a.title or "kolo-perf: " + ", ".join(dict.fromkeys(r["collective"] for r in runs))
    draw(script(runs, a.output, title), a.output, a.script)
    n, nf = len(runs), len(a.files)
    print(f"kolo-perf plot: {n} run{'' if n == 1 else 's'} of {nf} file{'' if nf == 1 else 's'} drawn in {a.output}")


if __name__ == "__main__":
    main()
