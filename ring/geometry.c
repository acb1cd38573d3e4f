/* geometry.c - program.h's geometry entry points (see geometry.h). */
#include "ring/geometry.h"

#include <stdlib.h>

size_t kolo_round_chunk(const kolo_geometry *g, size_t base) { return kolo_geo_round_chunk(g, base); }

size_t kolo_round_span(const kolo_geometry *g, size_t rce) { return rce * kolo_geo_parts(g); }

void kolo_chunk_range(const kolo_geometry *g, size_t base, size_t rce, int ch, int chunk,
                      int blocked, size_t *off, size_t *n) {
  kolo_geo_chunk_range(g, base, rce, ch, chunk, blocked, off, n);
}

void kolo_program_free(kolo_program *p) {
  free(p->steps);
  free(p->peers);
  p->steps = NULL;
  p->peers = NULL;
  p->nsteps = 0;
  p->npeers = 0;
}
