/* geometry.c - where chunks lie in a round (see program.h). */
#include <stdlib.h>

#include "ring/program.h"

#define KOLO_CHUNK_ALIGN_BYTES 64

static size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }

static size_t round_parts(const kolo_geometry *g) {
  return g->layout == KOLO_LAYOUT_RING ? (size_t)g->nchannels * (size_t)g->nranks
                                       : (size_t)g->nchannels;
}

size_t kolo_round_chunk(const kolo_geometry *g, size_t base) {
  if (base >= g->count) return 0;
  size_t align = KOLO_CHUNK_ALIGN_BYTES / g->elem_size;
  if (align == 0) align = 1;
  size_t rce = div_up(g->count - base, round_parts(g));
  rce = div_up(rce, align) * align;
  return rce < g->chunk_elems ? rce : g->chunk_elems;
}

size_t kolo_round_span(const kolo_geometry *g, size_t rce) {
  return rce * round_parts(g);
}

static void clip(size_t start, size_t limit, size_t rce, size_t *n) {
  *n = start >= limit ? 0 : (limit - start < rce ? limit - start : rce);
}

void kolo_chunk_range(const kolo_geometry *g, size_t base, size_t rce, int ch,
                      int chunk, int blocked, size_t *off, size_t *n) {
  if (g->layout == KOLO_LAYOUT_RING) {
    size_t start = base + ((size_t)ch * (size_t)g->nranks + (size_t)chunk) * rce;
    clip(start, g->count, rce, n);
    *off = start;
    return;
  }
  size_t start = base + (size_t)ch * rce;
  clip(start, g->count, rce, n);
  *off = (blocked ? (size_t)chunk * g->count : 0) + start;
}

void kolo_program_free(kolo_program *p) {
  free(p->steps);
  p->steps = NULL;
  p->nsteps = 0;
}
