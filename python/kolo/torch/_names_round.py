"""The rounds of name= (_names.py): in a control round where some rank
waits for a named call, every rank (of the round's process set) gathers
every rank's pending named calls on that set (ENTRY int64s each) and
runs, in the order of the lowest rank not joined, those every rank not
joined holds; a joined rank replays them (the global set only).
A round in which no name is held everywhere and no rank polls is a
deadlock: every rank raises the same sentence, naming each rank's call
and the ranks that have not made it.  Every rank reads the same tables,
so every rank reaches the same verdict."""
import torch

from kolo._lib import KoloError, check, ffi, lib
from kolo.torch import _comms, _join, _names
from kolo.torch._placement import ptr

ENTRY = 7  # [kind, digest, description length, call, root, CUDA, name key]


def _gather_entries(table, ps):
    """Every rank's pending entries on ps (rows of ENTRY ints), in their order."""
    most = max(row[7] for row in table)
    if most == 0:
        return [[] for _ in table]
    mine = torch.zeros((most, ENTRY), dtype=torch.int64)
    for i, e in enumerate(_names.pending(ps)):
        mine[i] = torch.tensor(e.row, dtype=torch.int64)
    every = torch.empty((len(table), most, ENTRY), dtype=torch.int64)
    comm = ps.host()
    check(lib.koloAllGather(ptr(mine), ptr(every), most * ENTRY, lib.koloInt64, comm, ffi.NULL), comm,
          "kolo.torch (the names of pending calls)")
    return [every[r, :row[7]].tolist() for r, row in enumerate(table)]


def _gather_text(text, ps):
    """Every rank's text (up to NAME_BYTES - 1 bytes of it)."""
    n, size = len(ps.ranks), _join.NAME_BYTES
    mine, every = ffi.new("char[%d]" % size), ffi.new("char[%d]" % (size * n))
    raw = text.encode()[:size - 1]
    ffi.memmove(mine, raw, len(raw))
    comm = ps.host()
    check(lib.koloAllGather(mine, every, size, lib.koloUint8, comm, ffi.NULL), comm, "kolo.torch (names)")
    return [ffi.string(every + r * size, size).decode(errors="replace") for r in range(n)]


def settle(table, ps):
    """Every rank's part in a round on ps (None: the global set) where some
    rank waits for a named call (the same table everywhere, so the same
    verdict): runs the names every rank not joined holds, or raises when
    every rank is blocked for good."""
    ps = _join.the_set(ps)
    joined = [r for r, row in enumerate(table) if row[0] == _join.JOINED]
    active = [r for r in range(len(table)) if r not in joined]
    entries = _gather_entries(table, ps)
    held = [{e[6]: e for e in rows} for rows in entries]
    matched = [e[6] for e in entries[active[0]] if all(e[6] in held[r] for r in active)]
    for key in matched:
        _run(key, {r: held[r][key] for r in active}, active, joined, ps)
    if not matched and not any(row[8] for row in table):
        raise KoloError(lib.koloInvalidUsage, _deadlock(table, held, active, ps))


def _mine(key, ps):
    return next((e for e in _names.pending(ps) if e.key == key), None)


def _run(key, rows, active, joined, ps):
    """One name every rank not joined holds: run it (a joined rank replays
    it), refuse it (a joined rank cannot answer it) or raise a mismatch."""
    entry = _mine(key, ps)
    if _join.mismatch(rows, active):
        name = _gather_text(entry.name if entry else "", ps)[active[0]]
        _names.cancel(entry)
        raise KoloError(lib.koloInvalidUsage, _join.mismatch(rows, active, name, ps))
    if joined:
        refused = _join.refusal(rows, active, joined)
        if refused:
            if entry:
                entry.error = KoloError(lib.koloInvalidUsage, refused)
                _names.cancel(entry)
            return
        desc = _join.send_desc(entry.desc if entry else [0] * rows[active[0]][2], active[0])
        if entry is None:
            _join.replay(desc)
            return
    _names.cancel(entry)
    try:
        entry.handle = entry.issue()
    except (KoloError, ValueError, TypeError) as e:  # alike on every rank: its handle raises it
        entry.error = e


def _deadlock(table, held, active, ps):
    """The sentence when every rank waits on something no other will make."""
    me = ps.ranks.index(_comms.rank())
    mine = next((e.name for e in _names.pending(ps) if e.key == table[me][1]), "")
    names = _gather_text(mine if table[me][0] == _join.WAITING else "", ps)
    parts = []
    for r, row in enumerate(table):
        who = _join.job_rank(ps, r)
        if row[0] == _join.WAITING:
            lacking = [_join.job_rank(ps, q) for q in active if row[1] not in held[q]]
            parts.append("rank %d waits for %s(name=%r), which rank%s %s %s not made" % (
                who, _join.call_name(row), names[r], "s" if len(lacking) > 1 else "", ", ".join(map(str, lacking)),
                "have" if len(lacking) > 1 else "has"))
        elif row[0] == _join.JOINED:
            parts.append("rank %d joined" % who)
        else:
            parts.append("rank %d calls %s" % (who, _join.call_name(row)))
    where = "every rank" if ps.process_set_id == 0 else "every rank of process set %d (ranks %s)" % (
        ps.process_set_id, ps.ranks)
    return ("kolo.torch: named calls cannot be matched, %s waits: %s; a named call runs once every rank "
            "has made it (in any order), and a rank waiting for one makes no other call" % (where, "; ".join(parts)))


def settle_if_waiting(table, ps):
    """settle(table, ps) where some rank waits for a named call; whether it did."""
    if not any(row[0] == _join.WAITING for row in table):
        return False
    settle(table, ps)
    return True
