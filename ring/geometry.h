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

/* [*off, *off + *n) of chunk `chunk` of buffer `buf` (kolo_buf_id) of
 * channel ch in the round at base with chunk size rce; a scratch chunk's
 * offset is within the task's scratch (program.h). */
KOLO_HD void kolo_geo_buf_range(const kolo_geometry *g, size_t base, size_t rce, int ch, int buf, int chunk,
                                int in_blocked, int out_blocked, size_t *off, size_t *n) {
  if (buf == KOLO_BUF_SCRATCH) {
    kolo_geo_chunk_range(g, base, rce, ch, chunk, 0, off, n);
    *off = (size_t)chunk * g->chunk_elems;
    return;
  }
  kolo_geo_chunk_range(g, base, rce, ch, chunk, buf == KOLO_BUF_IN ? in_blocked : out_blocked, off, n);
}

/* Bytes of a task's scratch (KOLO_SCRATCH_CHUNKS chunks). */
KOLO_HD size_t kolo_geo_scratch_bytes(const kolo_geometry *g) {
  return (size_t)KOLO_SCRATCH_CHUNKS * g->chunk_elems * g->elem_size;
}

#endif
