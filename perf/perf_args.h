/* perf_args.h - the command line shared by kolo-perf and kolo-mpi-ref, and
 * the size arithmetic of nccl-tests (what a row's size, counts and bus
 * bandwidth factor are for each collective).
 *
 * The enums below carry the same values as kolo.h's, so kolo-perf casts them;
 * kolo-mpi-ref does not need the library at all.
 */
#ifndef KOLO_PERF_ARGS_H
#define KOLO_PERF_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
  PERF_ALL_REDUCE, PERF_REDUCE_SCATTER, PERF_ALL_GATHER, PERF_BROADCAST, PERF_REDUCE, PERF_SENDRECV,
  PERF_ALL_TO_ALL, PERF_GATHER, PERF_SCATTER, PERF_NUM_COLLS
} perf_coll;

/* Same values as koloDataType_t. */
typedef enum {
  PERF_INT8, PERF_UINT8, PERF_INT32, PERF_UINT32, PERF_INT64, PERF_UINT64, PERF_FLOAT16, PERF_FLOAT32,
  PERF_FLOAT64, PERF_BFLOAT16, PERF_FLOAT8E4M3, PERF_FLOAT8E5M2, PERF_NUM_TYPES
} perf_type;

/* Same values as koloRedOp_t; PERF_MULSUM (nccl-tests' "mulsum") stands for
 * a premul-sum op made for each call with koloRedOpCreatePreMulSum. */
typedef enum { PERF_SUM, PERF_PROD, PERF_MAX, PERF_MIN, PERF_AVG, PERF_MULSUM, PERF_NUM_OPS } perf_op;

/* Which placements a sweep runs (--inplace). */
enum { PERF_PLACE_BOTH = -1, PERF_PLACE_OUT = 0, PERF_PLACE_IN = 1 };

/* How the ranks' times become the row's time (-a, nccl-tests' values). */
enum { PERF_AVERAGE_RANK0 = 0, PERF_AVERAGE_MEAN = 1, PERF_AVERAGE_MIN = 2, PERF_AVERAGE_MAX = 3 };

/* What -z waits for after each call (nccl-tests' values). */
enum {
  PERF_BLOCKING_NONE = 0,        /* issue every call, wait once at the end */
  PERF_BLOCKING_BARRIER = 1,     /* wait for each call, then a barrier of all ranks (timed) */
  PERF_BLOCKING_WAIT = 2,        /* wait for each call, no barrier */
  PERF_BLOCKING_OUTER = 3        /* wait and barrier after each -m group; the barrier is not timed */
};

/* Which tool parses: flags only one of them has are refused by the other. */
enum { PERF_TOOL_KOLO = 1, PERF_TOOL_MPI = 2 };

/* Devices --devices may list. */
#define PERF_MAX_GPUS 64

/* Which launches `kolo-perf prims` times (--launch). */
enum { PERF_LAUNCH_ENTRY = 1, PERF_LAUNCH_GRID = 2, PERF_LAUNCH_BOTH = 3 };

typedef struct {
  perf_coll coll;
  /* nccl-tests' flags, with its letters and meanings */
  size_t min_bytes, max_bytes; /* -b, -e */
  size_t step_bytes;           /* -i: increment when step_factor == 1 */
  size_t step_factor;          /* -f */
  int iters, warmup;           /* -n, -w */
  int agg_iters;               /* -m: calls per timed iteration, issued as one group */
  int run_cycles;              /* -N: sweeps, each printed; 0: until stopped */
  int check;                   /* -c: checked calls per row (0: none; the first wrong one ends it) */
  perf_type type;              /* -d */
  perf_op op;                  /* -o */
  int root, average;           /* -r, -a: PERF_AVERAGE_* */
  int parallel_init;           /* -p: each thread inits its own rank (koloCommInitRank) */
  int blocking;                /* -z: PERF_BLOCKING_* */
  int report_cputime;          /* -C: the time column is the host's time to issue the calls */
  int timeout_s;               /* -T: a row that runs longer fails the job (0: never) */
  int graph_launches;          /* -G: launches of one CUDA graph of the -n x -m calls (0: no graph) */
  int threads;                 /* -t: threads per process */
  int gpus_per_thread;         /* -g: ranks per thread (nccl-tests' GPUs per thread) */
  /* kolo-perf's own */
  int placement;               /* --inplace: PERF_PLACE_* */
  int offset;                  /* --offset: the buffers start this many bytes past a 4 KiB boundary */
  int procs, procs_given;      /* -P, --procs; whether it was on the command line */
  int bind_core;               /* --bind core: process i of -P on allowed CPU i (mod their count) */
  int mem_cuda, print_params;  /* --mem cuda, --params (kolo-perf) */
  const char *json;            /* --json FILE (or nccl-tests' -J), or NULL */
  const char *label;           /* --label TEXT: the run's name in the JSON and on plots, or NULL */
  double ceiling_gbps;         /* --ceiling GBPS: the busbw ceiling to record (0: none) */
  int ceiling_memcpy;          /* --ceiling memcpy: measure it (host memory) */
  /* kolo-perf with CUDA */
  int devs[PERF_MAX_GPUS];     /* --devices LIST: rank r of this machine on devs[r % ndevs] */
  int ndevs;                   /* 0: --devices not given (all visible devices) */
  /* kolo-perf prims (the subcommand instead of a collective) */
  int prims, type_given;       /* "prims" was named (coll is PERF_NUM_COLLS); -d was given */
  int launch;                  /* --launch: PERF_LAUNCH_* */
  int blocks, block_threads;   /* --blocks (0: one full wave), --block-threads: the grid launch's shape */
  /* kolo-perf overlap's and p2p's options (perf_overlap.h, perf_p2p.h); NULL for other subcommands */
  const struct perf_overlap_opts *overlap;
  const struct perf_p2p_opts *p2p;
} perf_args;

/* Ranks one process runs: -t threads x -g ranks each. */
static inline int perf_local_ranks(const perf_args *a) { return a->threads * a->gpus_per_thread; }

/* Parses argv into *a.  Returns 0 to run, 1 when help was printed (exit 0),
 * -1 on a bad command line (the message is printed).  kolo-perf also takes
 * "prims" in place of the collective (a->prims). */
int perf_args_parse(perf_args *a, int argc, char **argv, int tool);

/* A subcommand's flags, parsed by the same loop: the shared flags it takes
 * (getopt values: letters, or the OPT_* of perf_args_opts.h) and its own
 * long flags (values from PERF_SUB_OPT up).  kolo-perf's tool. */
#define PERF_SUB_OPT 2000
struct option;
typedef struct {
  const char *name;                 /* argv's one word besides the flags; NULL: none */
  const int *shared;                /* 0-terminated */
  const struct option *longs;       /* NULL-terminated; NULL: none */
  void (*defaults)(perf_args *a);   /* after the shared ones; NULL: none */
  int (*apply)(perf_args *a, int c, const char *v);   /* one own flag: 0, or -1 for a bad value */
  int (*check)(perf_args *a, const char *prog);        /* after every flag: 0, or -1 having said why; or NULL */
  void (*usage)(FILE *out, const char *prog);
} perf_sub_flags;
int perf_args_parse_sub(perf_args *a, int argc, char **argv, const perf_sub_flags *sub);
void perf_usage(FILE *out, const char *prog, int tool);
/* "32M" -> 33554432 (K, M, G: powers of 1024).  Returns 0 or -1. */
int perf_parse_size(const char *s, size_t *out);
/* A whole number (decimal or 0x hex) in lo..hi.  Returns 0 or -1. */
int perf_parse_int(const char *s, int lo, int hi, int *out);
/* s's index in names[0..n), or -1. */
int perf_parse_name(const char *s, const char *const *names, int n);
/* A name of perf_type (nccl-tests' or an alias) or perf_op; -1 if none. */
int perf_parse_type(const char *s);
int perf_parse_op(const char *s);
int perf_parse_coll(const char *s);

const char *perf_coll_name(perf_coll c);
const char *perf_type_name(perf_type t); /* as nccl-tests prints it */
const char *perf_op_name(perf_op o);
size_t perf_type_size(perf_type t);
int perf_coll_has_op(perf_coll c);   /* takes -o */
int perf_coll_has_root(perf_coll c); /* takes -r */

/* One row of a sweep: what is moved for a given -b..-e size on nranks. */
typedef struct {
  size_t bytes;      /* the size column: the whole array for RS / AG / all-to-all / gather / scatter */
  size_t elems;      /* the count column: bytes / type size */
  size_t count;      /* the count argument of the call (RS: recvcount, AG: sendcount; per block) */
  size_t send_elems; /* elements in the send buffer */
  size_t recv_elems; /* elements in the receive buffer */
} perf_sizes;

perf_sizes perf_sizes_for(perf_coll c, perf_type t, size_t size, int nranks);
/* The busbw / algbw factor: 2(n-1)/n, (n-1)/n or 1. */
double perf_bus_factor(perf_coll c, int nranks);
/* The -b..-e sweep, as nccl-tests steps it: next size, 0 after the last. */
size_t perf_next_size(const perf_args *a, size_t size);
/* Bytes each buffer needs for the largest row, rounded up to 4 KiB. */
size_t perf_buffer_bytes(const perf_args *a, int nranks);

#endif
