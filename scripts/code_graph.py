#!/usr/bin/env python3
"""The include and call graph of kolo's C sources, checked against its layers.

A node is one file without its extension: a .c and its .h (a .cu and its
.cuh) are one node, since the header is the .c's face.  An arrow A -> B is
  - an include: A has `#include "..."` of one of B's files, resolved the way
    the build resolves it (the including file's folder, then the repo root,
    then include/);
  - a call: A uses, inside a function body, an initializer or a macro, a
    function that only B's sources define (ctags; static functions and names
    defined by two nodes are left out: they name no one file).

It reports
  (a) every circle (strongly connected component) of core/ nodes with more
      than two nodes, with the arrows that close it;
  (b) every arrow from a lower layer to a higher one.
A circle is known when a baseline circle holds all of its nodes (a circle
that shrank stays known); an upward arrow is known by its exact line.  With
--baseline FILE only what the baseline does not know fails (exit 1), and
baseline lines that no longer occur are printed as "fixed: ..." so that the
baseline can only shrink.  --write-baseline FILE writes today's lines.
"""
import argparse
import os
import re
import subprocess
import sys

# The layers, bottom up (docs/dev/architecture.md: "a layer includes only the
# layers below it"; DESIGN.md: common < transport < ring/kernels < core <
# nccl/perf).  kernels/ executes ring/'s step programs, so it sits above ring/.
# cudasim/ stands in for the CUDA runtime, and include/ holds declarations
# only: both are below everything.  Folders on one level may not call each
# other either way without this check seeing it as upward; they are peers.
LAYERS = {
    "cudasim": 0, "include": 0,
    "common": 1,
    "transport": 2,
    "ring": 3,
    "kernels": 4,
    "core": 5,
    "nccl": 6, "fusion": 6,
    "perf": 7,
}
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
CIRCLE_FOLDER = "core"

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)
# An identifier, not a member (after "." or "->"): a struct field named as
# some function is no use of that function.
IDENT_RE = re.compile(r"(?<![\w.>])(?<!->)[A-Za-z_]\w*")
# Comments, then string and char literals: their words are no calls.
STRIP_RE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def node_of(path):
    return os.path.splitext(path)[0]


def layer_of(node):
    return LAYERS.get(node.split("/", 1)[0])


def source_files(root):
    out = []
    for top in sorted(LAYERS):
        for d, _, files in os.walk(os.path.join(root, top)):
            out += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(SOURCE_EXT)]
    return sorted(out)


def resolve_include(root, src, kind, name):
    """The repo file an include names, as the compiler's -I order finds it."""
    dirs = [os.path.dirname(src)] if kind == '"' else []
    for d in dirs + ["", "include"]:
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(root, p)):
            return p
    return None


def function_defs(root, files):
    """name -> set of nodes that define it with external linkage."""
    # universal-ctags (scripts/setup.sh installs it)
    cmd = ["ctags", "-f", "-", "--fields=+K", "--c-kinds=f", "--languages=C", "--langmap=C:.c.h.cu.cuh",
           "--sort=no"] + files
    text = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=True).stdout
    defs, static = {}, set()
    for line in text.splitlines():
        cols = line.split("\t")
        if len(cols) < 4:
            continue
        defs.setdefault(cols[0], set()).add(node_of(cols[1]))
        if "file:" in cols[4:] or re.search(r"\b(static|__device__|__global__|KOLO_DEVFN)\b", cols[2]):
            static.add(cols[0])
    # A static or device function is no C file's to call, and a name two nodes
    # define (a helper each keeps for itself) names no one file.
    return {name: nodes.pop() for name, nodes in defs.items() if len(nodes) == 1 and name not in static}


def used_names(text):
    """Identifiers in function bodies, initializers and macro bodies."""
    text = re.sub(r'extern\s*"C"\s*\{', " ", text)  # C++ linkage opens no body
    text = STRIP_RE.sub(" ", text)
    names, depth, out = [], 0, []
    for line in text.split("\n"):
        m = re.match(r"\s*#\s*define\s+\w+(.*)", line)
        if m:
            out.append(m.group(1))
            continue
        if line.lstrip().startswith("#"):
            continue
        for ch in re.split(r"([{}])", line):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth = max(0, depth - 1)
            elif depth > 0:
                out.append(ch)
    for chunk in out:
        names += IDENT_RE.findall(chunk)
    return set(names)


def build_graph(root):
    """{(A, B): set of reasons}: includes and calls between distinct nodes."""
    files = source_files(root)
    defs = function_defs(root, files)
    arrows = {}
    for f in files:
        with open(os.path.join(root, f), errors="replace") as fh:
            text = fh.read()
        a = node_of(f)
        for kind, name in INCLUDE_RE.findall(text):
            p = resolve_include(root, f, kind, name)
            if p and node_of(p) != a:
                arrows.setdefault((a, node_of(p)), set()).add('#include "%s"' % p)
        for name in used_names(text):
            b = defs.get(name)
            if b and b != a:
                arrows.setdefault((a, b), set()).add(name + "()")
    return arrows


def circles(arrows, folder):
    """Strongly connected components (Tarjan, iterative) of folder's nodes."""
    succ = {}
    for a, b in arrows:
        if a.startswith(folder + "/") and b.startswith(folder + "/"):
            succ.setdefault(a, []).append(b)
            succ.setdefault(b, [])
    index, low, stack, on, comps, n = {}, {}, [], set(), [], 0
    for start in sorted(succ):
        if start in index:
            continue
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = n
        n += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    comps.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = n
                n += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(succ[w]))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return sorted(comps, key=lambda c: (-len(c), c))


def upward(arrows):
    """Lines of arrows from a lower layer to a higher one, one per name."""
    out = []
    for (a, b), why in sorted(arrows.items()):
        la, lb = layer_of(a), layer_of(b)
        if la is not None and lb is not None and la < lb:
            out += ["up: %s -> %s: %s" % (a, b, w) for w in sorted(why)]
    return out


def circle_line(comp):
    return "circle: " + " ".join(comp)


def report(arrows):
    """Prints the findings; returns (circle node sets, upward lines)."""
    comps = [c for c in circles(arrows, CIRCLE_FOLDER) if len(c) > 2]
    for comp in comps:
        print("circle of %d nodes in %s/: %s" % (len(comp), CIRCLE_FOLDER, " ".join(comp)))
        members = set(comp)
        for (a, b), why in sorted(arrows.items()):
            if a in members and b in members:
                print("  %s -> %s: %s" % (a, b, ", ".join(sorted(why))))
    ups = upward(arrows)
    for line in ups:
        print(line)
    print("summary: %d circle(s) of more than two nodes in %s/, %d upward arrow(s) over %d file pair(s)"
          % (len(comps), CIRCLE_FOLDER, len(ups), len({l.split(":")[1] for l in ups})))
    return comps, ups


def check_baseline(path, comps, ups):
    """New violations fail; baseline lines that no longer occur are 'fixed'."""
    with open(path) as fh:
        base = [l.strip() for l in fh if l.strip() and not l.startswith("#")]
    base_circles = [set(l.split()[1:]) for l in base if l.startswith("circle:")]
    base_up = {l for l in base if l.startswith("up:")}
    new = [circle_line(c) for c in comps if not any(set(c) <= b for b in base_circles)]
    new += [l for l in ups if l not in base_up]
    now = {circle_line(c) for c in comps} | set(ups)
    for line in base:
        inside = [c for c in comps if line.startswith("circle:") and set(c) <= set(line.split()[1:])]
        if line in now:
            continue
        if inside:
            print("shrunk: %s (now %s nodes; write the baseline anew)" % (line, "+".join(str(len(c)) for c in inside)))
        else:
            print("fixed: " + line)
    for line in new:
        print("NEW: " + line)
    if new:
        print("%d violation(s) that %s does not list: a lower layer reaches a higher one through an "
              "operations table it owns and the higher one fills (docs/dev/architecture.md)" % (len(new), path))
    return 1 if new else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--baseline", help="fail only on violations this file does not list")
    ap.add_argument("--write-baseline", help="write today's violations to this file")
    ap.add_argument("--calls-only", action="store_true",
                    help="arrows of calls alone, no includes (a header's types tie files without a call)")
    args = ap.parse_args()
    arrows = build_graph(os.path.abspath(args.root))
    if args.calls_only:
        arrows = {k: {w for w in v if w.endswith("()")} for k, v in arrows.items()}
        arrows = {k: v for k, v in arrows.items() if v}
    comps, ups = report(arrows)
    if args.write_baseline:
        with open(args.write_baseline, "w") as fh:
            fh.write("# scripts/code_graph.py's known violations: only ever remove lines\n")
            fh.writelines(circle_line(c) + "\n" for c in comps)
            fh.writelines(l + "\n" for l in ups)
    return check_baseline(args.baseline, comps, ups) if args.baseline else 0


if __name__ == "__main__":
    sys.exit(main())
