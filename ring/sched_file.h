/* sched_file.h - schedule files: step programs that users write, in the
 * text format of docs/schedule-format.md, parsed into the programs of
 * program.h and proved by the checker (check.h) before anything runs them.
 *
 * A file states its rank count and holds sections, one per collective (and
 * root), each with a layout, a channel count and one program per rank and
 * channel.  Every program that moves data is a multi-peer program
 * (program.h): each step names the rank it receives from and sends to, so
 * the executors run it over the point-to-point pipes of those peers.  The
 * buffers' blocking (in_blocked / out_blocked) follows from the collective
 * and the root, never from the file.
 *
 * Parsing and checking are pure (no I/O): the core reads the file
 * (KOLO_SCHEDULE_FILE, core/sched_env.c) and the fuzz target
 * tests/fuzz/fuzz_sched_file.c feeds the parser any bytes. */
#ifndef KOLO_RING_SCHED_FILE_H
#define KOLO_RING_SCHED_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "kolo.h"
#include "ring/program.h"

#define KOLO_SCHED_VERSION 1
#define KOLO_SCHED_MAX_SECTIONS 64
#define KOLO_SCHED_MAX_STEPS 65536 /* per program */
#define KOLO_SCHED_MAX_LINE 4096   /* bytes per line */
#define KOLO_SCHED_MAX_BYTES (16u << 20)

/* One collective's programs. */
typedef struct {
  int coll;      /* kolo_coll */
  int root;      /* broadcast, reduce, gather, scatter; else -1 */
  int layout;    /* kolo_layout */
  int nchannels; /* programs per rank: channel ch of a call runs program ch % nchannels */
  int line;      /* of its `collective` line */
  kolo_program *progs; /* [channel * nranks + rank] */
} kolo_sched_section;

typedef struct {
  int nranks;
  int nsections;
  kolo_sched_section *sections;
  uint64_t hash; /* FNV-1a of the file's bytes: ranks compare it at init */
} kolo_sched_file;

/* Parses len bytes of text (`name` in messages: "name:line: what").
 * koloSuccess with *out filled, or koloInvalidArgument with the sentence
 * in why and *out empty (koloSystemError when out of memory). */
koloResult_t kolo_sched_parse(const char *text, size_t len, const char *name, kolo_sched_file *out, char *why,
                              size_t whylen);

/* Proves every section with the checker for the file's rank count;
 * koloInvalidArgument with "name:line: <the checker's sentence>" when one
 * fails. */
koloResult_t kolo_sched_check(const kolo_sched_file *f, const char *name, char *why, size_t whylen);

/* Rank's program for (coll, root) on channel ch, or NULL when the file has
 * no such section (root is ignored for unrooted collectives). */
const kolo_program *kolo_sched_find(const kolo_sched_file *f, int coll, int root, int ch, int rank);
/* 1 when the file has a section of coll (any root). */
int kolo_sched_has(const kolo_sched_file *f, int coll);

void kolo_sched_free(kolo_sched_file *f);

/* FNV-1a, 64 bits. */
uint64_t kolo_sched_hash(const char *text, size_t len);

#endif
