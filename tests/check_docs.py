#!/usr/bin/env python3
"""tests/check_docs.py BUILD - the docs check (tests/check_docs.sh runs it).

1. Every relative link of the repository's Markdown files resolves to a file
   of the repository (and its #anchor to a heading of it).
2. Every fenced `sh` block of README.md, CONTRIBUTING.md and docs/*.md is run
   here (no tag), or its info string says where else it runs (`sh ci=PATH`:
   a script tests/run_all.sh runs) or what it needs that CI lacks
   (`sh needs=gpu|rdma|mpirun|root`), or it is part of the two-host recipe
   (`sh two-hosts=both|A|B`).
3. The KOLO_* variables the code reads (common/config.c's table, and the
   names in string literals of the library, the tools and the Python
   package, less #defined macros) are those docs/environment.md documents.
4. No "issue N" in user text (README, docs, CONTRIBUTING, kolo-perf --help,
   the sources outside tests/).
5. kolo.h's version, the SONAME and the Python package agree with
   CHANGELOG.md's latest version.
6. The README's C example is examples/processes.c; it is compiled against
   BUILD/lib/libkolo.so, and the untagged blocks run as written, in a scratch
   folder that holds the repository's top-level entries (BUILD as build/).
7. The two-host recipe of docs/running.md runs as written in two network
   namespaces (host A at 10.0.0.1, host B at 10.0.0.2, KOLO_HOSTID telling
   them apart); SKIP where namespaces cannot be made.
Only the standard library; exit 1 on the first failing part's end.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
STATIC_ONLY = os.environ.get("KOLO_DOCS_STATIC_ONLY") == "1"
# Documented ahead of the code (a change on another branch adds them): not
# failed as unread.  Remove a name once the code reads it.
PENDING = set()  # variables documented ahead of the code that reads them
NEEDS = {"gpu", "rdma", "mpirun", "root"}
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def tracked(pattern):
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "--cached", "--others", "--exclude-standard", pattern],
                         capture_output=True, text=True, check=True).stdout.split()
    return sorted(p for p in out if os.path.exists(os.path.join(ROOT, p)))


def slug(heading):
    h = heading.strip().lower().replace("`", "")
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    text = re.sub(r"```.*?```", "", read(path), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def check_links():
    n = 0
    for md in tracked("*.md"):
        text = re.sub(r"```.*?```", "", read(md), flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue
            n += 1
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(ROOT, os.path.dirname(md), path)) if path else os.path.join(ROOT, md)
            if not full.startswith(ROOT + os.sep) and full != ROOT:
                fail("%s: link %s points outside the repository" % (md, target))
            elif not os.path.exists(full):
                fail("%s: link %s: no such file" % (md, target))
            elif anchor and full.endswith(".md") and anchor not in anchors(os.path.relpath(full, ROOT)):
                fail("%s: link %s: no heading with that anchor" % (md, target))
    print("links: %d relative links checked" % n)


def blocks(path, lang):
    """(info, text) of each fenced block of `lang`."""
    out = []
    for m in re.finditer(r"^```(\S*)([^\n]*)\n(.*?)^```\s*$", read(path), re.M | re.S):
        if m.group(1) == lang:
            out.append((m.group(2).strip(), m.group(3)))
    return out


def user_pages():
    return ["README.md", "CONTRIBUTING.md"] + tracked("docs/*.md")


def check_blocks():
    runs, two = [], {}
    run_all = read("tests/run_all.sh")
    for page in user_pages():
        if "/dev/" in page:
            continue
        for info, text in blocks(page, "sh"):
            tag = dict(kv.split("=", 1) for kv in info.split() if "=" in kv)
            if not info:
                runs.append((page, text))
            elif "ci" in tag:
                path = tag["ci"]
                if not os.path.exists(os.path.join(ROOT, path)):
                    fail("%s: sh block says ci=%s: no such file" % (page, path))
                elif path != "tests/run_all.sh" and path not in run_all:
                    fail("%s: sh block says ci=%s, which tests/run_all.sh does not run" % (page, path))
            elif "needs" in tag:
                if not set(tag["needs"].split(",")) <= NEEDS:
                    fail("%s: sh block needs=%s: say one of %s" % (page, tag["needs"], ", ".join(sorted(NEEDS))))
            elif "two-hosts" in tag and page == "docs/running.md":
                two[tag["two-hosts"]] = text
            else:
                fail("%s: sh block with info '%s': no tag this check knows" % (page, info))
    print("sh blocks: %d run here, two-host recipe in %d blocks" % (len(runs), len(two)))
    return runs, two


def code_variables():
    macros = set()
    names = set()
    lib_dirs = ["common", "core", "ring", "kernels", "transport", "fusion", "nccl", "perf", "cudasim", "include"]
    for d in lib_dirs:
        for f in tracked(d + "/*"):
            if not re.search(r"\.(c|h|cu|cuh|cc)$", f):
                continue
            text = read(f)
            macros |= set(re.findall(r"#\s*define\s+(KOLO_[A-Z0-9_]+)", text))
            names |= set(re.findall(r'"(KOLO_[A-Z0-9_]+)"', text))
    for f in tracked("python/*"):
        if f.endswith(".py"):
            names |= set(re.findall(r"[\"'](KOLO_[A-Z0-9_]+)[\"']", read(f)))
    table = set(re.findall(r'\{"(KOLO_[A-Z0-9_]+)",', read("common/config.c")))
    return (names - macros) | table


def check_variables():
    documented = set()
    for line in read("docs/environment.md").splitlines():
        if line.startswith("| `KOLO_"):
            documented |= set(re.findall(r"`(KOLO_[A-Z0-9_]+)`", line.split(" | ")[0]))
    read_by_code = code_variables()
    for v in sorted(read_by_code - documented):
        fail("%s is read by the code but not in docs/environment.md" % v)
    for v in sorted(documented - read_by_code - PENDING):
        fail("%s is in docs/environment.md but the code does not read it" % v)
    for v in sorted(PENDING & read_by_code):
        print("note: %s is read by the code now: remove it from PENDING in tests/check_docs.py" % v)
    print("variables: %d read by the code, %d documented" % (len(read_by_code), len(documented)))


def check_history():
    pat = re.compile(r"\bissue [0-9]", re.I)
    for page in user_pages():
        for i, line in enumerate(read(page).splitlines(), 1):
            if pat.search(line):
                fail("%s:%d: an issue number in user text" % (page, i))
    for d in ["common", "core", "ring", "kernels", "transport", "fusion", "nccl", "perf", "cudasim", "include",
              "python", "scripts", "examples", "tests"]:
        for f in tracked(d + "/*"):
            if "/results/" in f or f == "tests/check_docs.py" or not re.search(r"\.(c|h|cc|cu|cuh|py|sh|txt)$", f):
                continue
            for i, line in enumerate(read(f).splitlines(), 1):
                if pat.search(line):
                    fail("%s:%d: an issue number in a source file's text" % (f, i))


def check_versions():
    h = read("include/kolo.h")
    v = ".".join(re.search(r"#define KOLO_%s (\d+)" % k, h).group(1) for k in ("MAJOR", "MINOR", "PATCH"))
    so = re.search(r"SOVERSION (\d+)", read("CMakeLists.txt")).group(1)
    py = re.search(r'^version = "([^"]+)"', read("python/pyproject.toml"), re.M).group(1)
    m = re.search(r"^## (\d+\.\d+\.\d+)\b(.*)$", read("CHANGELOG.md"), re.M)
    if not m:
        fail("CHANGELOG.md has no '## X.Y.Z' version heading")
        return
    if m.group(1) != v:
        fail("CHANGELOG.md's latest version %s is not kolo.h's %s" % (m.group(1), v))
    if "libkolo.so.%s" % so not in m.group(2):
        fail("CHANGELOG.md's heading for %s does not say libkolo.so.%s (CMakeLists.txt's SOVERSION)" % (v, so))
    if py != v or ("kolo %s" % py) not in m.group(2):
        fail("python/pyproject.toml's version %s and CHANGELOG.md's heading (%s) disagree with kolo.h's %s"
             % (py, m.group(2).strip(), v))
    print("versions: kolo %s, libkolo.so.%s, Python package %s" % (v, so, py))


def scratch():
    d = tempfile.mkdtemp(prefix="kolo-docs.")
    for e in os.listdir(ROOT):
        if e not in (".git", "build"):
            os.symlink(os.path.join(ROOT, e), os.path.join(d, e))
    os.symlink(BUILD, os.path.join(d, "build"))
    return d


def run_blocks(runs):
    cs = blocks("README.md", "c")
    if not cs:
        fail("README.md has no C example")
        return
    if cs[0][1] != read("examples/processes.c"):
        fail("README.md's C example differs from examples/processes.c (CI builds that one installed)")
    if not os.path.exists(os.path.join(BUILD, "lib", "libkolo.so")):
        fail("%s/lib/libkolo.so is missing: build first (scripts/build.sh)" % BUILD)
        return
    d = scratch()
    with open(os.path.join(d, "example.c"), "w", encoding="utf-8") as f:
        f.write(cs[0][1])
    for page, text in runs:
        t0 = time.time()
        try:
            r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=d, capture_output=True, text=True,
                               timeout=60)
            ok, out = r.returncode == 0, r.stdout + r.stderr
        except subprocess.TimeoutExpired as e:
            ok, out = False, "timed out after 60 s\n" + str(e.stdout or "")
        first = text.strip().splitlines()[0]
        if ok:
            print("ok: %s: %s (%.1f s)" % (page, first, time.time() - t0))
        else:
            fail("%s: the block starting '%s' failed:\n%s" % (page, first, out[-3000:]))
    subprocess.run(["rm", "-rf", d])


def netns_recipe(two):
    if set(two) != {"both", "A", "B"}:
        fail("docs/running.md: the two-host recipe needs sh blocks two-hosts=both, A and B")
        return
    if os.geteuid() != 0:
        print("SKIP: two-host recipe: network namespaces need root")
        return
    tag = "kd%d" % os.getpid()
    made = []

    def ip(*args):
        r = subprocess.run(["ip"] + list(args), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("ip %s: %s" % (" ".join(args), r.stderr.strip()))

    try:
        try:
            ip("netns", "add", tag + "hub")
            made.append(tag + "hub")
            ip("-n", tag + "hub", "link", "add", "br0", "type", "bridge")
            ip("-n", tag + "hub", "link", "set", "br0", "up")
            for i, host in enumerate("AB"):
                ns = tag + host
                ip("netns", "add", ns)
                made.append(ns)
                ip("-n", tag + "hub", "link", "add", "v" + host, "type", "veth", "peer", "name", "eth0", "netns", ns)
                ip("-n", tag + "hub", "link", "set", "v" + host, "master", "br0", "up")
                ip("-n", ns, "addr", "add", "10.0.0.%d/24" % (i + 1), "dev", "eth0")
                ip("-n", ns, "link", "set", "eth0", "up")
                ip("-n", ns, "link", "set", "lo", "up")
        except (RuntimeError, OSError) as e:
            print("SKIP: two-host recipe: network namespaces cannot be made here: %s" % e)
            return
        d = scratch()
        procs = {}
        t0 = time.time()
        for host in "AB":
            script = two["both"] + two[host]
            env = dict(os.environ, KOLO_HOSTID="docs-host-" + host)
            procs[host] = subprocess.Popen(["ip", "netns", "exec", tag + host, "timeout", "-k", "5", "90",
                                            "bash", "-e", "-o", "pipefail", "-c", script], cwd=d, env=env,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        outs = {h: p.communicate()[0] for h, p in procs.items()}
        subprocess.run(["rm", "-rf", d])
        bad = [h for h, p in procs.items() if p.returncode != 0]
        if bad or "#wrong" not in outs["A"]:
            for h in "AB":
                print("--- host %s (exit %d):\n%s" % (h, procs[h].returncode, outs[h][-3000:]))
            fail("docs/running.md: the two-host recipe failed on host(s) %s" % (", ".join(bad) or "A (no table)"))
        else:
            print("ok: docs/running.md: two-host recipe over TCP in two network namespaces (%.1f s)"
                  % (time.time() - t0))
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def check_help():
    perf = os.path.join(BUILD, "bin", "kolo-perf")
    if not os.path.exists(perf):
        return
    text = ""
    for sub in ([], ["net"], ["overlap"], ["plot"], ["topo"], ["p2p"], ["tune"]):
        r = subprocess.run([perf] + sub + ["--help"], capture_output=True, text=True, timeout=20)
        text += r.stdout + r.stderr
    if re.search(r"\bissue [0-9]", text, re.I):
        fail("kolo-perf --help names an issue")


def main():
    t0 = time.time()
    check_links()
    runs, two = check_blocks()
    check_variables()
    check_history()
    check_versions()
    if not STATIC_ONLY:
        check_help()
        run_blocks(runs)
        netns_recipe(two)
    print("check_docs: %.1f s" % (time.time() - t0))
    if failures:
        print("check_docs: FAILED (%d)" % len(failures))
        return 1
    print("check_docs: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
