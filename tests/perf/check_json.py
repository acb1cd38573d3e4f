#!/usr/bin/env python3
"""Checks a kolo-perf --json file against docs/perf-json.md, schema 1.

  check_json.py FILE [--expect KEY=VALUE ...] [--rows N]
      every field's presence, type and unit relations (algbw = size / time,
      busbw = algbw x the bus factor, avg_busbw = the mean); --expect checks
      config values (or label=...), --rows the number of results.
  check_json.py --self-test FILE
      FILE must pass, and each of a set of broken copies of it must fail:
      the checker itself can tell a bad file from a good one.
Exit 0 when the file is good, 1 with the reasons on stderr.
"""
import copy
import json
import sys

CONFIG = {"tool": str, "library": str, "launch": str, "memory": str, "nranks": int, "procs": int,
          "threads": int, "collective": str, "type": str, "redop": str, "root": int, "minbytes": int,
          "maxbytes": int, "stepfactor": int, "stepbytes": int, "iters": int, "warmup_iters": int,
          "agg_iters": int, "run_cycles": int, "check": int, "average": int, "blocking": int,
          "parallel_init": int, "cudagraph": int, "report_cputime": int, "timeout_s": int,
          "nthreads": int, "ngpus": int, "placement": str}
RESULT = {"cycle": int, "size": int, "count": int, "type": str, "redop": str, "root": int, "in_place": bool,
          "time_us": float, "cputime_us": float, "algbw": float, "busbw": float, "wrong": int}
COLLS = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "sendrecv", "alltoall",
         "gather", "scatter"}


def is_type(v, t):
    if t is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t is int:
        return isinstance(v, int) and not isinstance(v, bool)
    return isinstance(v, t)


def fields(obj, spec, where, errs):
    if not isinstance(obj, dict):
        errs.append(f"{where} is not an object")
        return
    for k, t in spec.items():
        if k not in obj:
            errs.append(f"{where}: no '{k}'")
        elif not is_type(obj[k], t):
            errs.append(f"{where}.{k} = {obj[k]!r} is not a {t.__name__}")


def bus_factor(coll, n):
    if coll == "all_reduce":
        return 2.0 * (n - 1) / n
    if coll in ("reduce_scatter", "all_gather", "alltoall", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


def close(a, b):
    return abs(a - b) <= 0.02 * max(abs(a), abs(b)) + 2e-4  # the file rounds to 3-4 decimals


def check_result(r, i, cfg, errs):
    where = f"results[{i}]"
    fields(r, RESULT, where, errs)
    if errs:
        return
    if r["time_us"] <= 0 or r["cputime_us"] < 0 or r["size"] < 0 or r["wrong"] < 0:
        errs.append(f"{where}: a negative or zero time, size or count")
    if r["time_us"] > 0 and not close(r["algbw"], r["size"] / 1e3 / r["time_us"]):
        errs.append(f"{where}: algbw {r['algbw']} is not size / time_us ({r['size']} B / {r['time_us']} us)")
    f = bus_factor(cfg["collective"], cfg["nranks"])
    if not close(r["busbw"], r["algbw"] * f):
        errs.append(f"{where}: busbw {r['busbw']} is not algbw x {f:.3f}")
    if "wall_us" in r and not is_type(r["wall_us"], float):
        errs.append(f"{where}.wall_us is not a number")
    if not 0 <= r["cycle"] < max(cfg["run_cycles"], 1) and cfg["run_cycles"] != 0:
        errs.append(f"{where}: cycle {r['cycle']} is outside -N {cfg['run_cycles']}")


def check_top(d, errs):
    if not isinstance(d, dict):
        return errs.append("the file is not a JSON object")
    if d.get("schema") != "kolo-perf":
        errs.append(f"schema is {d.get('schema')!r}, not 'kolo-perf'")
    if d.get("schema_version") != 1:
        errs.append(f"schema_version is {d.get('schema_version')!r}, not 1")
    if "label" not in d or not (d["label"] is None or isinstance(d["label"], str)):
        errs.append("label is missing, or neither a string nor null")
    for k, t in (("results", list), ("wrong", int), ("avg_busbw", float), ("config", dict)):
        if not is_type(d.get(k), t):
            errs.append(f"'{k}' is missing or not a {t.__name__}")
    if "ceiling" in d:
        fields(d["ceiling"], {"busbw": float, "source": str}, "ceiling", errs)


def check(d):
    errs = []
    check_top(d, errs)
    if errs:
        return errs
    cfg = d["config"]
    fields(cfg, CONFIG, "config", errs)
    if errs:
        return errs
    if cfg["collective"] not in COLLS or cfg["placement"] not in ("both", "in", "out"):
        errs.append(f"config: collective {cfg['collective']!r} or placement {cfg['placement']!r} unknown")
    if cfg["threads"] != cfg["nthreads"] * cfg["ngpus"] and not cfg["launch"].startswith(("launcher", "mpirun")):
        errs.append(f"config: threads {cfg['threads']} is not nthreads x ngpus")
    for i, r in enumerate(d["results"]):
        check_result(r, i, cfg, errs)
    if errs:
        return errs
    bws = [r["busbw"] for r in d["results"]]
    if bws and not close(d["avg_busbw"], sum(bws) / len(bws)):
        errs.append(f"avg_busbw {d['avg_busbw']} is not the mean busbw {sum(bws) / len(bws):.4f}")
    if d["wrong"] != sum(r["wrong"] for r in d["results"]):
        errs.append("wrong is not the sum of the results' wrong")
    return errs


def expect(d, pairs, rows):
    errs = []
    for p in pairs:
        k, v = p.split("=", 1)
        got = d.get("label") if k == "label" else d["config"].get(k)
        if str(got) != v:
            errs.append(f"expected {k} = {v}, the file says {got!r}")
    if rows is not None and len(d["results"]) != rows:
        errs.append(f"expected {rows} results, the file has {len(d['results'])}")
    return errs


def broken_copies(d):
    """(what, broken copy) pairs, each of which the checker must refuse."""
    def mut(what, f):
        c = copy.deepcopy(d)
        f(c)
        return what, c
    return [
        mut("no schema_version", lambda c: c.pop("schema_version")),
        mut("schema_version 2", lambda c: c.update(schema_version=2)),
        mut("a config field gone", lambda c: c["config"].pop("agg_iters")),
        mut("iters as a string", lambda c: c["config"].update(iters="5")),
        mut("busbw off by 2x", lambda c: c["results"][0].update(busbw=c["results"][0]["busbw"] * 2 + 1)),
        mut("algbw not size/time", lambda c: c["results"][-1].update(time_us=c["results"][-1]["time_us"] * 3)),
        mut("in_place as 0", lambda c: c["results"][0].update(in_place=0)),
        mut("avg_busbw wrong", lambda c: c.update(avg_busbw=c["avg_busbw"] + 5)),
        mut("ceiling without source", lambda c: c.update(ceiling={"busbw": 1.0})),
        mut("label a number", lambda c: c.update(label=3)),
    ]


def main(argv):
    if len(argv) >= 2 and argv[0] == "--self-test":
        d = json.load(open(argv[1]))
        bad = check(d)
        if bad:
            print("self-test: the good file fails:", *bad, sep="\n  ", file=sys.stderr)
            return 1
        missed = [what for what, c in broken_copies(d) if not check(c)]
        if missed:
            print("self-test: the checker passed broken files:", *missed, sep="\n  ", file=sys.stderr)
            return 1
        print(f"self-test: the good file passes, {len(broken_copies(d))} broken copies fail")
        return 0
    path, pairs, rows = argv[0], [], None
    rest = argv[1:]
    while rest:
        if rest[0] == "--expect":
            pairs.append(rest[1])
        elif rest[0] == "--rows":
            rows = int(rest[1])
        rest = rest[2:]
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"{path}: not a JSON file: {e}", file=sys.stderr)
        return 1
    errs = check(d)
    if not errs:
        errs = expect(d, pairs, rows)
    for e in errs:
        print(f"{path}: {e}", file=sys.stderr)
    if not errs:
        print(f"{path}: schema {d['schema_version']}, {len(d['results'])} results: good")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
