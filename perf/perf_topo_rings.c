/* perf_topo_rings.c - kolo-perf topo's rings: for a rank layout, the flat
 * ring of each channel and the hierarchical all-reduce's intra- and
 * inter-host rings, built by kolo's own ring/topology.c. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_topo.h"
#include "ring/topology.h"

#define TOPO_MAX_RANKS 4096

/* "HxR" or "h0,h1,...": each rank's host id into host_of; the rank count, or -1. */
static int parse_layout(const char *spec, uint64_t *host_of) {
  char *end;
  errno = 0;
  long h = strtol(spec, &end, 10);
  if (*end == 'x') {
    long r = strtol(end + 1, &end, 10);
    if (errno || *end || h < 1 || r < 1 || h * r > TOPO_MAX_RANKS) return -1;
    for (long i = 0; i < h * r; i++) host_of[i] = (uint64_t)(i / r);
    return (int)(h * r);
  }
  int n = 0;
  for (const char *p = spec; *p; p = *end ? end + 1 : end) {
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < 0 || (*end != ',' && *end != '\0') || n == TOPO_MAX_RANKS) return -1;
    host_of[n++] = (uint64_t)v;
  }
  return n > 0 ? n : -1;
}

/* "#     LABEL I: 0 1 | 2 3  (then back to 0)" for a ring just built (and
 * freed here); -1 when building it failed (out of memory). */
static int print_ring(FILE *out, const kolo_hosts *h, koloResult_t built, kolo_ring *ring, const char *label,
                      int index) {
  if (built != koloSuccess) return -1;
  fprintf(out, "#     %s %d:", label, index);
  for (int i = 0; i < ring->nranks; i++) {
    int r = ring->order[i], sep = i > 0 && h->host[r] != h->host[ring->order[i - 1]];
    fprintf(out, "%s%d", sep ? " | " : " ", r);
  }
  fprintf(out, "  (then back to %d)\n", ring->order[0]);
  kolo_ring_free(ring);
  return 0;
}

static void print_hosts(FILE *out, const kolo_hosts *h) {
  for (int hi = 0; hi < h->nhosts; hi++) {
    fprintf(out, "#     host %d:", hi);
    for (int j = 0; j < h->host_size[hi]; j++) fprintf(out, " %d", kolo_hosts_rank(h, hi, j));
    fprintf(out, "\n");
  }
}

/* Flat rings of channels 0..n-1; -1 when out of memory. */
static int print_flat(FILE *out, const kolo_hosts *h, int channels) {
  fprintf(out, "#   flat rings, one per channel ('|' where the ring crosses to the next host):\n");
  kolo_ring ring;
  for (int c = 0; c < channels; c++)
    if (print_ring(out, h, kolo_ring_build_channel(h, c, &ring), &ring, "channel", c) != 0) return -1;
  return 0;
}

/* The hierarchical all-reduce's rings: each host's, then each local index's. */
static int print_hier(FILE *out, const kolo_hosts *h) {
  fprintf(out, "#   hierarchical all-reduce: intra-host rings (reduce-scatter, all-gather):\n");
  kolo_ring ring;
  for (int hi = 0; hi < h->nhosts; hi++)
    if (print_ring(out, h, kolo_ring_build_intra(h, kolo_hosts_rank(h, hi, 0), &ring), &ring, "host", hi) != 0)
      return -1;
  fprintf(out, "#   and inter-host rings (all-reduce of each shard), one per local index:\n");
  for (int j = 0; j < kolo_hosts_max_size(h); j++) {
    int r = -1;
    for (int hi = 0; hi < h->nhosts && r < 0; hi++)
      if (j < h->host_size[hi]) r = kolo_hosts_rank(h, hi, j);
    if (print_ring(out, h, kolo_ring_build_inter(h, r, &ring), &ring, "local", j) != 0) return -1;
  }
  return 0;
}

int perf_topo_rings(FILE *out, const char *layout, int channels) {
  static uint64_t host_of[TOPO_MAX_RANKS];
  int n = parse_layout(layout, host_of);
  if (n < 1) {
    fprintf(stderr, "kolo-perf topo: --layout %s: expected HxR (e.g. 2x4) or each rank's host (e.g. 0,0,1,1), "
                    "at most %d ranks\n", layout, TOPO_MAX_RANKS);
    return -1;
  }
  kolo_hosts h;
  if (kolo_hosts_build(n, host_of, &h) != koloSuccess) return fprintf(stderr, "kolo-perf topo: out of memory\n"), -1;
  if (channels == 0) channels = kolo_hosts_max_size(&h) < 16 ? kolo_hosts_max_size(&h) : 16;
  fprintf(out, "# rings kolo builds for layout %s: %d ranks on %d host(s)%s\n", layout, n, h.nhosts,
          kolo_hosts_uniform(&h) ? "" : ", not all of one size");
  print_hosts(out, &h);
  int bad = print_flat(out, &h, channels);
  if (bad == 0 && h.nhosts > 1) bad = print_hier(out, &h);
  if (bad == 0)
    fprintf(out, "#   per call, kolo's cost model (ring/algo.h) picks flat or hierarchical and the channels\n");
  kolo_hosts_free(&h);
  if (bad) fprintf(stderr, "kolo-perf topo: out of memory building the rings\n");
  return bad;
}
