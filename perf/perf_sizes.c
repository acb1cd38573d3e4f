/* perf_sizes.c - nccl-tests' size arithmetic: what a row moves for each
 * collective, its bus bandwidth factor, and the steps of a sweep. */
#include "perf/perf_args.h"

/* The collectives whose size is the whole array, a block per rank. */
static int per_rank(perf_coll c) {
  return c == PERF_REDUCE_SCATTER || c == PERF_ALL_GATHER || c == PERF_ALL_TO_ALL || c == PERF_GATHER ||
         c == PERF_SCATTER;
}

perf_sizes perf_sizes_for(perf_coll c, perf_type t, size_t size, int nranks) {
  perf_sizes s;
  size_t esize = perf_type_size(t), n = (size_t)nranks;
  s.elems = size / esize;
  s.count = s.send_elems = s.recv_elems = s.elems;
  if (per_rank(c)) {
    s.count = s.elems / n; /* per rank (per block), as nccl-tests rounds it */
    s.elems = s.count * n;
    int many_in = c == PERF_REDUCE_SCATTER || c == PERF_ALL_TO_ALL || c == PERF_SCATTER;
    int many_out = c == PERF_ALL_GATHER || c == PERF_ALL_TO_ALL || c == PERF_GATHER;
    s.send_elems = many_in ? s.elems : s.count;
    s.recv_elems = many_out ? s.elems : s.count;
  }
  s.bytes = s.elems * esize;
  return s;
}

double perf_bus_factor(perf_coll c, int nranks) {
  double n = nranks;
  if (c == PERF_ALL_REDUCE) return 2.0 * (n - 1) / n;
  return per_rank(c) ? (n - 1) / n : 1.0;
}

size_t perf_next_size(const perf_args *a, size_t size) {
  size_t f = a->step_factor, b = a->step_bytes;
  /* 0 ends the sweep: past SIZE_MAX, and from size 0 with a factor (0 * f never moves) */
  size_t next = f > 1 ? (size > SIZE_MAX / f ? 0 : size * f) : (size > SIZE_MAX - b ? 0 : size + b);
  return (next == 0 || next > a->max_bytes) ? 0 : next;
}

size_t perf_buffer_bytes(const perf_args *a, int nranks) {
  perf_sizes s = perf_sizes_for(a->coll, a->type, a->max_bytes, nranks);
  size_t elems = s.send_elems > s.recv_elems ? s.send_elems : s.recv_elems;
  size_t bytes = elems * perf_type_size(a->type);
  return (bytes + 4095) & ~(size_t)4095;
}
