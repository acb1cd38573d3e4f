/* geometry.h - round and chunk geometry of step programs, as inline
 * functions that compile for the host and, under nvcc, for the device, so
 * that the host executor, the CUDA executor and the schedules share one
 * definition (the rules are in program.h). */
#ifndef KOLO_RING_GEOMETRY_H
#define KOLO_RING_GEOMETRY_H

#include <stddef.h>

#include "ring/program.h"

#define KOLO_CHUNK_ALIGN_BYTES 64

KOLO_HD size_t kolo_geo_parts(const kolo_geometry *g) {
  return g->layout == KOLO_LAYOUT_RING ? (size_t)g->nchannels * (size_t)g->nranks
                                       : (size_t)g->nchannels;
}

KOLO_HD size_t kolo_geo_round_chunk(const kolo_geometry *g, size_t base) {
  if (base >= g->count) return 0;
  size_t align = KOLO_CHUNK_ALIGN_BYTES / g->elem_size;
  if (align == 0) align = 1;
  size_t parts = kolo_geo_parts(g);
  size_t rce = (g->count - base + parts - 1) / parts;
  rce = (rce + align - 1) / align * align;
  return rce < g->chunk_elems ? rce : g->chunk_elems;
}

KOLO_HD void kolo_geo_chunk_range(const kolo_geometry *g, size_t base, size_t rce, int ch,
                                  int chunk, int blocked, size_t *off, size_t *n) {
  size_t start = g->layout == KOLO_LAYOUT_RING
                     ? base + ((size_t)ch * (size_t)g->nranks + (size_t)chunk) * rce
                     : base + (size_t)ch * rce;
  *n = start >= g->count ? 0 : (g->count - start < rce ? g->count - start : rce);
  *off = start + ((g->layout != KOLO_LAYOUT_RING && blocked) ? (size_t)chunk * g->count : 0);
}

#endif
