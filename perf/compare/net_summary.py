#!/usr/bin/env python3
"""The summary of perf/compare.sh p2p and ib (perf/compare/p2p.sh, ib.sh).

usage: net_summary.py OUT REPEATS SIZE LAT_SIZE RXE SOCKET

SOCKET (1/0): OUT holds the p2p runs (iperf3*.I.json, net-*.I.json,
ar.I.r0.json); RXE (run/skip): OUT/rxe.txt holds the guest's figures.
Medians over the runs, and the ratios, also within each run.  Exits 1 when a
kolo run reports a wrong byte.
"""
import json, math, os, statistics, sys
out, repeats, size, lat_size, rxe = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
socket = sys.argv[6] != "0"
def load(name):
    runs = []
    for i in range(1, repeats + 1):
        try:
            runs.append(json.load(open(f"{out}/{name}.{i}.json")))
        except (OSError, ValueError):
            pass
    return runs
def med(v):
    return statistics.median(v) if v else float("nan")

iperf = [r["end"]["sum_received"]["bits_per_second"] / 8e9 for r in load("iperf3") if "end" in r]
# --bidir: the mean of the two directions' received rates (each direction's share)
bidir = [(r["end"]["sum_received"]["bits_per_second"] + r["end"]["sum_received_bidir_reverse"]["bits_per_second"])
         / 2 / 8e9 for r in load("iperf3-bidir") if "sum_received_bidir_reverse" in r.get("end", {})]
nbw = [r["results"][0]["bw_GBps"] for r in load("net-bw")]
nbidir = [r["results"][0]["bw_GBps"] for r in load("net-bidir")]
nlat = [(r["results"][0]["lat_p50_us"], r["results"][0]["lat_p99_us"]) for r in load("net-lat")]
wrong = sum(x["wrong"] for r in load("net-bw") + load("net-bidir") + load("net-lat") for x in r["results"])
ar = [json.load(open(f"{out}/ar.{i}.r0.json")) for i in range(1, repeats + 1) if os.path.exists(f"{out}/ar.{i}.r0.json")]
arbus = [x["busbw"] for r in ar for x in r["results"] if not x.get("in_place", False)]
arbus_ip = [x["busbw"] for r in ar for x in r["results"] if x.get("in_place", False)]
wrong += sum(x["wrong"] for r in ar for x in r["results"])

fmt = lambda v: ", ".join(f"{x:.3f}" for x in v)
def ratio(num, den):  # of the medians
    return med(num) / med(den) if num and den else float("nan")
# The same ratios within each run (a busy machine moves every figure of a
# run together): the median of the per-run ratios.
def paired(num, den):
    return med([a / b for a, b in zip(num, den) if b > 0]) if len(num) == len(den) and num else float("nan")
if socket:
    print()
    print(f"# socket path, veth pair between 2 namespaces: medians of {repeats} runs (GB = 1e9 bytes)")
    print(f"#   iperf3                               {med(iperf):8.3f} GB/s   runs: {fmt(iperf)}")
    print(f"#   iperf3 --bidir, per direction        {med(bidir):8.3f} GB/s   runs: {fmt(bidir)}")
    print(f"#   kolo-perf net -P socket, {size:>4} bw     {med(nbw):8.3f} GB/s   runs: {fmt(nbw)}")
    print(f"#   kolo-perf net -P socket, {size:>4} bidir  {med(nbidir):8.3f} GB/s   runs: {fmt(nbidir)}   (per direction)")
    print(f"#   kolo-perf net -P socket, {lat_size:>4} B lat  {med([l[0] for l in nlat]):8.2f} us p50, "
          f"{med([l[1] for l in nlat]):.2f} us p99 (half round trip)")
    print(f"#   kolo all_reduce 2 ranks, {size:>4} busbw  {med(arbus):8.3f} GB/s   runs: {fmt(arbus)}"
          f"   (in place {med(arbus_ip):.3f})")
    print(f"# ratio socket p2p / iperf3          = {ratio(nbw, iperf):5.2f}")
    print(f"# ratio all-reduce busbw / socket p2p = {ratio(arbus, nbw):5.2f}")
    print(f"#   the same within each run, median: {paired(nbw, iperf):5.2f} and {paired(arbus, nbw):5.2f}")
    print(f"# for reference (a 2-rank ring moves {size} each way at once, so both-ways figures are its ceiling):")
    print(f"#   all-reduce busbw / kolo-perf net --bidir  = {ratio(arbus, nbidir):5.2f}   (within each run: {paired(arbus, nbidir):5.2f})")
    print(f"#   all-reduce busbw / iperf3 --bidir         = {ratio(arbus, bidir):5.2f}")
    print(f"#   kolo-perf net --bidir / iperf3 --bidir    = {ratio(nbidir, bidir):5.2f}")

if rxe == "run":
    # name -> {repeat: value}.  A figure that is not a finite number (perftest
    # prints "inf" when its clock misreads) is left out, and said.
    vals, byrep, dropped, rep = {}, {}, [], 0
    for parts in (line.split() for line in open(f"{out}/rxe.txt")):
        if len(parts) < 2:
            continue
        if parts[0] == "repeat":
            rep = int(parts[1]) if parts[1].isdigit() else rep + 1
            continue
        try:
            x = float(parts[1])
        except ValueError:
            continue
        if math.isfinite(x):
            byrep.setdefault(parts[0], {})[rep] = x
            vals.setdefault(parts[0], []).append(x)
        else:
            dropped.append(f"{parts[0]} (repeat {rep}): {parts[1]}")
    g = lambda k: med(vals.get(k, []))
    v = lambda k: vals.get(k, [])
    def paired_rep(num, den):  # per-repeat ratios, over the repeats that have both figures
        a, b = byrep.get(num, {}), byrep.get(den, {})
        return med([a[r] / b[r] for r in sorted(a) if r in b and b[r] > 0])
    f2 = lambda x: ", ".join(f"{y:.2f}" for y in x)
    print()
    print(f"# ib, soft-RoCE rxe1 -> rxe0 in the QEMU guest: medians of {len(v('ib_write_bw_MBps'))} runs")
    print(f"#   ib_write_bw -s 65536                 {g('ib_write_bw_MBps'):9.2f} MB/s (1e6; perftest's 2^20 figure converted)   runs: {f2(v('ib_write_bw_MBps'))}")
    print(f"#   kolo-perf net -P ib --bw -s 65536    {g('kolo_ib_bw_MBps'):9.2f} MB/s   runs: {f2(v('kolo_ib_bw_MBps'))}")
    if v('base_ib_bw_MBps'):
        print(f"#   the same, BASE_PERF_BIN              {g('base_ib_bw_MBps'):9.2f} MB/s   runs: {f2(v('base_ib_bw_MBps'))}")
    print(f"#   ib_write_lat -s {lat_size:<5}                {g('ib_write_lat_us'):9.2f} us typical   runs: {f2(v('ib_write_lat_us'))}")
    print(f"#   kolo-perf net -P ib --lat -s {lat_size:<5}   {g('kolo_ib_lat_us'):9.2f} us median   runs: {f2(v('kolo_ib_lat_us'))}")
    if v('base_ib_lat_us'):
        print(f"#   the same, BASE_PERF_BIN              {g('base_ib_lat_us'):9.2f} us median   runs: {f2(v('base_ib_lat_us'))}")
    if v('ib_send_lat_us'):
        print(f"#   ib_send_lat -s {lat_size:<5}                 {g('ib_send_lat_us'):9.2f} us typical   runs: {f2(v('ib_send_lat_us'))}"
              "   (completions on both sides, as kolo)")
    print(f"# ratio ib bw / ib_write_bw   = {ratio(v('kolo_ib_bw_MBps'), v('ib_write_bw_MBps')):5.2f};"
          f" within each run, median: {paired_rep('kolo_ib_bw_MBps', 'ib_write_bw_MBps'):5.2f}")
    print(f"# ratio ib lat / ib_write_lat = {ratio(v('kolo_ib_lat_us'), v('ib_write_lat_us')):5.2f};"
          f" within each run, median: {paired_rep('kolo_ib_lat_us', 'ib_write_lat_us'):5.2f}")
    if v('ib_send_lat_us'):
        print(f"#   for reference: ib_send_lat / ib_write_lat = {paired_rep('ib_send_lat_us', 'ib_write_lat_us'):5.2f},"
              f" kolo lat / ib_send_lat = {paired_rep('kolo_ib_lat_us', 'ib_send_lat_us'):5.2f} (within each run, median)")
    if v('base_ib_bw_MBps') or v('base_ib_lat_us'):
        print(f"# BASE_PERF_BIN, the same ratios: bw {g('base_ib_bw_MBps') / g('ib_write_bw_MBps'):5.2f}"
              f" (within each run {paired_rep('base_ib_bw_MBps', 'ib_write_bw_MBps'):5.2f}),"
              f" lat {g('base_ib_lat_us') / g('ib_write_lat_us'):5.2f}"
              f" (within each run {paired_rep('base_ib_lat_us', 'ib_write_lat_us'):5.2f})")
    if dropped:
        print(f"# left out (not finite): {'; '.join(dropped)}")
    wrong += int(sum(vals.get("kolo_ib_wrong", [])))
print(f"# #wrong bytes over all kolo runs: {wrong}")
sys.exit(1 if wrong else 0)
