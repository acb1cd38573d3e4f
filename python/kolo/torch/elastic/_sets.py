"""Process sets across kolo.torch.elastic's resets.

Before kolo.torch shuts down for a reset, each survivor notes its added
sets (id, ranks) and the generation's members (worker ids by rank).  After
it joined the next generation, a set whose workers are all still members
is added again over their new ranks, with its id and its ProcessSet object
(so a `process_set=` the script holds still works); a set that named a
worker now gone is dropped: its object says so when a call uses it.  The
new rank 0's table of sets is broadcast, and every rank of the new
generation, a worker that just joined too (in kt.init()), splits their
communicators in the same order: a worker added later has every carried
set (it is in none of them) and the same next id for add_process_set.
"""
from kolo.torch import _process_sets
from kolo.torch._state_sync import broadcast_object
from kolo.torch.elastic import _rendezvous

_shared = [None]  # the generation whose sets were shared (a second kt.init() shares nothing)


def before_reset():
    """What to carry: [(set, id, ranks)], the members, the next id (read
    before the shutdown, which drops the sets)."""
    sets, next_id = _process_sets.added()
    return [(ps, ps.process_set_id, list(ps.ranks)) for ps in sets], _rendezvous.members(), next_id


def after_reset(saved):
    """A survivor's part, on the new generation (collective)."""
    sets, old, next_id = saved
    new = _rendezvous.members()
    table, known = [], {}
    for ps, process_set_id, ranks in sets:
        gone = [r for r in ranks if old[r] not in new]
        if gone:
            ps.dropped = ("rank%s %s of its ranks %s left the job; add a set of the ranks that remain if one is "
                          "needed" % ("s" if len(gone) > 1 else "", ", ".join(map(str, gone)), ranks))
        else:
            table.append((process_set_id, [new.index(old[r]) for r in ranks]))
            known[process_set_id] = ps
    share(table, next_id, known)


def share(table, next_id, known):
    """Rank 0's table, then every set of it added again on every rank."""
    _shared[0] = _rendezvous.generation()
    table, next_id = broadcast_object((table, next_id), 0)
    _process_sets.carry(table, next_id, known)


def at_init():
    """A worker's part at kt.init(): with the survivors' reset if it was
    added to a running job, else among workers that all start now."""
    if _shared[0] != _rendezvous.generation():
        share([], 1, {})
