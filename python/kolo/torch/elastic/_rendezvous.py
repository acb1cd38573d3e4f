"""kolo.torch.elastic's rendezvous: the job's generations, kept in a store
that the launcher runs (a torch.distributed.TCPStore at KOLO_ELASTIC_STORE,
host:port; this worker is KOLO_ELASTIC_ID there).

Keys, under kolo/elastic/:
  gen        the newest generation's number (the launcher writes it)
  members/G  generation G's worker ids, ascending: a worker's rank is its
             place in that list (survivors keep their order, workers added
             later come after them)
  uid/G      generation G's koloUniqueId, made and published by its rank 0
  ready/W    worker W, started later, waits to join (a counter)
  reset/G    a worker of G asks for a new generation (a counter)

Every wait here is bounded: the store's by KOLO_TIMEOUT_MS, a later
worker's wait for a generation that has it by KOLO_ELASTIC_JOIN_TIMEOUT_MS.
"""
import datetime
import os
import time

from kolo._lib import KoloError, check, ffi, lib

PREFIX = "kolo/elastic/"
_conn = {}  # "store", "id", "gen" (the generation joined or tried last)


def _env_ms(name, default):
    try:
        return int(os.environ.get(name, "")) or default
    except ValueError:
        return default


def store(timeout_ms=None):
    """The store client (made on first use; bounded by timeout_ms or KOLO_TIMEOUT_MS)."""
    if "store" not in _conn:
        import torch.distributed as dist

        where = os.environ.get("KOLO_ELASTIC_STORE", "")
        host, _, port = where.rpartition(":")
        ms = timeout_ms or _env_ms("KOLO_TIMEOUT_MS", 300000)
        try:
            _conn["store"] = dist.TCPStore(host, int(port), None, False, datetime.timedelta(milliseconds=ms))
        except (RuntimeError, ValueError, OSError) as e:
            raise RuntimeError("kolo.torch.elastic: cannot reach the rendezvous store at KOLO_ELASTIC_STORE=%r "
                               "within %d ms: %s" % (where, ms, e)) from None
        _conn["id"] = int(os.environ.get("KOLO_ELASTIC_ID", "-1"))
        if _conn["id"] < 0:
            raise RuntimeError("kolo.torch.elastic: KOLO_ELASTIC_ID (this worker's id in the store) is not set")
    return _conn["store"]


def generation():
    """The generation this worker joined (or tried to join) last."""
    return _conn["gen"]


def members():
    """The worker ids of the generation this worker joined last, by rank."""
    return list(_conn.get("members", []))


def newest():
    """The newest generation's number, as the store has it."""
    return int(store().get(PREFIX + "gen"))


def _members(s, gen):
    return [int(w) for w in s.get(PREFIX + "members/%d" % gen).decode().split(",") if w]


def _wait_for_generation(s, me, after, timeout_s):
    """(gen, members): the newest generation, once it has this worker (and is newer than `after`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        gen = newest()
        if after is None or gen > after:
            members = _members(s, gen)
            if me in members:
                return gen, members
            if after is not None:
                raise RuntimeError("kolo.torch.elastic: worker %d is not in generation %d (%s): the launcher "
                                   "took it for dead" % (me, gen, members))
        if time.monotonic() > deadline:
            raise TimeoutError("kolo.torch.elastic: worker %d found no generation to join within %.0f s "
                               "(newest: %d)" % (me, timeout_s, gen))
        time.sleep(0.05)


def join(cfg, timeout_ms, after=None):
    """This worker's host communicator in the newest generation: at init
    (after None: announced ready), or after a failure or an interrupt in
    generation `after` (asks for a newer one).  A rendezvous that fails
    because a member is gone asks for the next generation, until the
    deadline."""
    s = store(timeout_ms)
    me = _conn["id"]
    ms = timeout_ms or _env_ms("KOLO_TIMEOUT_MS", 300000)
    if after is None:
        s.add(PREFIX + "ready/%d" % me, 1)
        wait_s = _env_ms("KOLO_ELASTIC_JOIN_TIMEOUT_MS", 600000) / 1000.0
    else:
        s.add(PREFIX + "reset/%d" % after, 1)
        wait_s = ms / 1000.0
    deadline = time.monotonic() + wait_s + ms / 1000.0
    while True:
        gen, members = _wait_for_generation(s, me, after, max(0.0, deadline - time.monotonic()))
        _conn["gen"], _conn["members"] = gen, members
        try:
            return _init_rank(s, gen, members.index(me), len(members), cfg)
        except KoloError as e:
            if e.code not in (lib.koloRemoteError, lib.koloTimeout, lib.koloSystemError) or \
                    time.monotonic() > deadline:
                raise
            s.add(PREFIX + "reset/%d" % gen, 1)
            after = gen


def _init_rank(s, gen, rank, size, cfg):
    uid = ffi.new("koloUniqueId *")
    key = PREFIX + "uid/%d" % gen
    if rank == 0:
        check(lib.koloGetUniqueId(uid), None, "kolo.torch.elastic: koloGetUniqueId")
        s.set(key, bytes(ffi.buffer(uid)))
    else:
        ffi.buffer(uid)[:] = s.get(key)
    comm = ffi.new("koloComm_t *")
    res = lib.koloCommInitRankConfig(comm, size, uid[0], rank, cfg)
    if res != lib.koloSuccess and comm[0] != ffi.NULL:
        lib.koloCommAbort(comm[0])  # a handle whose init failed is still destroyed
    check(res, None, "kolo.torch.elastic: joining generation %d as rank %d of %d" % (gen, rank, size))
    return comm[0]
