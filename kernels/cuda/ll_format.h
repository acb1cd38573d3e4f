/* ll_format.h - the LL (low-latency) protocol's line format, as pure inline
 * helpers that compile for the host and, under nvcc, for the device (KOLO_HD
 * of ring/program.h), so that the CUDA executor and the host-side tests share
 * one definition.  Plain C (no CUDA header).  The protocol itself is
 * described in kernels/cuda_exec.h (KOLO_PROTO_LL).
 *
 * A slot of ll_slot_bytes (a multiple of 16) is ll_slot_bytes / 16 lines of
 * 16 bytes, four 32-bit words {data0, flag, data1, flag}.  A slice of
 * nbytes payload bytes (nbytes <= ll_slot_bytes / 2) takes the first
 * ceil(nbytes / 8) lines of its slot: line i carries payload bytes
 * [8i, 8i + 8), bytes 8i..8i+3 in data0 and 8i+4..8i+7 in data1 (little
 * endian, so that the payload is simply the 8 bytes as a uint64_t, whatever
 * the element size: eight 1-byte, four 2-byte or two 4-byte elements, or one
 * 8-byte element split in two 4-byte halves).  The last line of a slice
 * whose length is not a multiple of 8 carries min(8, nbytes - 8i) bytes and
 * is padded with zeros; a receiver writes only those bytes.
 *
 * Both flag words of every line of the slice of connector step `step` are
 * kolo_ll_flag(step) = step + 1 (32-bit, wrapping), except that step
 * 0xffffffff takes flag 1, not 0.  A line is ready when both flags match:
 * the sender writes a line as one 16-byte store, two 64-bit halves
 * {data0 | flag << 32, data1 | flag << 32}, each of which is single-copy
 * atomic, so a half whose flag matches carries its data.
 *
 * Flags repeat every 2^32 steps, which two things could fool:
 *  - a zeroed line (the region starts zeroed, and a slot whose slices were
 *    all short keeps the lines past them zeroed): no step has flag 0, so it
 *    never reads as ready (step 0xffffffff shares flag 1 with step 0, whose
 *    slot is another one: nslots is a power of two, at least 2);
 *  - a line of a slot that shorter slices left unwritten for 2^32 steps,
 *    whose old flag comes round again: as NCCL does, the sender of a step
 *    in the cleaning window (kolo_ll_clean_step: 64 consecutive steps every
 *    2^31, so every slot of up to 64) also rewrites every line of the slot
 *    past its slice with the current flag, so no line's flag is ever more
 *    than 2^31 + 64 steps old.
 */
#ifndef KOLO_KERNELS_CUDA_LL_FORMAT_H
#define KOLO_KERNELS_CUDA_LL_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "ring/program.h"

#define KOLO_LL_LINE_BYTES 16u   /* one line in the slot */
#define KOLO_LL_LINE_PAYLOAD 8u  /* payload bytes per line */

/* The 16-byte line as stored: {data0, flag, data1, flag}. */
typedef struct {
  uint32_t data0, flag0, data1, flag1;
} kolo_ll_line;

/* Payload bytes of one slice (one slot of ll_slot_bytes). */
KOLO_HD size_t kolo_ll_slice_bytes(size_t ll_slot_bytes) { return ll_slot_bytes / 2; }

/* Elements of one slice: the same on both ends of a connector. */
KOLO_HD size_t kolo_ll_slice_elems(size_t ll_slot_bytes, size_t elem_size) {
  return kolo_ll_slice_bytes(ll_slot_bytes) / elem_size;
}

/* Lines that nbytes payload bytes take. */
KOLO_HD size_t kolo_ll_lines(size_t nbytes) {
  return (nbytes + KOLO_LL_LINE_PAYLOAD - 1) / KOLO_LL_LINE_PAYLOAD;
}

/* Payload bytes line `line` carries in a slice of nbytes (0 past the end). */
KOLO_HD unsigned kolo_ll_line_bytes(size_t nbytes, size_t line) {
  size_t lo = line * KOLO_LL_LINE_PAYLOAD;
  if (lo >= nbytes) return 0;
  return nbytes - lo < KOLO_LL_LINE_PAYLOAD ? (unsigned)(nbytes - lo) : KOLO_LL_LINE_PAYLOAD;
}

/* The flag of the slice of connector step `step`: never 0. */
KOLO_HD uint32_t kolo_ll_flag(uint32_t step) { return step + 1u + (step == 0xffffffffu); }

/* Steps whose sender also rewrites the rest of its slot (see above): those
 * whose bits 6..30 are all set. */
#define KOLO_LL_CLEAN_MASK 0x7fffffc0u
KOLO_HD int kolo_ll_clean_step(uint32_t step) { return (step & KOLO_LL_CLEAN_MASK) == KOLO_LL_CLEAN_MASK; }

/* The two 64-bit halves of a line carrying `payload` with `flag`:
 * lo = {data0, flag}, hi = {data1, flag} in memory (little endian). */
KOLO_HD uint64_t kolo_ll_lo(uint64_t payload, uint32_t flag) {
  return (payload & 0xffffffffull) | ((uint64_t)flag << 32);
}
KOLO_HD uint64_t kolo_ll_hi(uint64_t payload, uint32_t flag) {
  return (payload >> 32) | ((uint64_t)flag << 32);
}

/* Whether a line read as halves lo, hi holds the slice with `flag`. */
KOLO_HD int kolo_ll_ready(uint64_t lo, uint64_t hi, uint32_t flag) {
  return (uint32_t)(lo >> 32) == flag && (uint32_t)(hi >> 32) == flag;
}

/* The payload of a line read as halves lo, hi. */
KOLO_HD uint64_t kolo_ll_payload(uint64_t lo, uint64_t hi) {
  return (lo & 0xffffffffull) | (hi << 32);
}

/* nb (<= 8) bytes at p as a payload, zero padded; byte j -> bits 8j..8j+7. */
KOLO_HD uint64_t kolo_ll_pack_bytes(const unsigned char *p, unsigned nb) {
  uint64_t v = 0;
  for (unsigned j = 0; j < nb; j++) v |= (uint64_t)p[j] << (8 * j);
  return v;
}

/* The first nb (<= 8) bytes of a payload to p; nothing beyond p[nb - 1]. */
KOLO_HD void kolo_ll_unpack_bytes(uint64_t v, unsigned char *p, unsigned nb) {
  for (unsigned j = 0; j < nb; j++) p[j] = (unsigned char)(v >> (8 * j));
}

/* Line struct <-> halves (host-side views; the device stores the halves). */
KOLO_HD kolo_ll_line kolo_ll_make_line(uint64_t payload, uint32_t flag) {
  kolo_ll_line l;
  l.data0 = (uint32_t)payload;
  l.flag0 = flag;
  l.data1 = (uint32_t)(payload >> 32);
  l.flag1 = flag;
  return l;
}

/* A whole slice, byte by byte (reference and host use): nbytes at src into
 * kolo_ll_lines(nbytes) lines with flag; then back to dst, writing exactly
 * nbytes.  kolo_ll_unpack returns 0 (and stops) at a line not ready. */
KOLO_HD void kolo_ll_pack(kolo_ll_line *lines, const void *src, size_t nbytes, uint32_t flag) {
  const unsigned char *s = (const unsigned char *)src;
  size_t n = kolo_ll_lines(nbytes);
  for (size_t i = 0; i < n; i++)
    lines[i] = kolo_ll_make_line(
        kolo_ll_pack_bytes(s + i * KOLO_LL_LINE_PAYLOAD, kolo_ll_line_bytes(nbytes, i)), flag);
}

KOLO_HD int kolo_ll_unpack(void *dst, const kolo_ll_line *lines, size_t nbytes, uint32_t flag) {
  unsigned char *d = (unsigned char *)dst;
  size_t n = kolo_ll_lines(nbytes);
  for (size_t i = 0; i < n; i++) {
    kolo_ll_line l = lines[i];
    if (l.flag0 != flag || l.flag1 != flag) return 0;
    uint64_t v = (uint64_t)l.data0 | ((uint64_t)l.data1 << 32);
    kolo_ll_unpack_bytes(v, d + i * KOLO_LL_LINE_PAYLOAD, kolo_ll_line_bytes(nbytes, i));
  }
  return 1;
}

#endif
