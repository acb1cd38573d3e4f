/* perf_tune.c - kolo-perf tune: per transport, forked ranks time an 8-byte
 * and a large ring all-reduce, fitted to the ring's formula (ring/algo.h) for
 * alpha and beta; then the crossovers (perf_tune_algos.c).  docs/tuning.md. */
#define _GNU_SOURCE
#include "perf/perf_tune.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kolo.h"
#include "common/config.h"
#include "perf/perf_pipe.h"
#include "perf/perf_sweep.h"
#include "perf/perf_tune_int.h"
#include "ring/schedule.h"
#ifdef KOLO_HAVE_IBVERBS
#include "transport/ib_dev.h"
#endif
#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>

#include "perf/perf_cuda.h"
#endif

/* A rank's buffer: host memory, or (--mem cuda) device memory and a stream
 * of its own, drained after each timed batch of calls.  Without CUDA no rank
 * gets --mem cuda: kolo-perf tune refuses it first. */
typedef struct {
  int cuda, rank;
  void *buf;
  void *stream; /* cudaStream_t; NULL on the host */
} tune_mem;

#ifdef KOLO_HAVE_CUDA
static int cuda_ok(cudaError_t e, int rank, const char *what) {
  if (e == cudaSuccess) return 0;
  fprintf(stderr, "kolo-perf tune: rank %d: %s: %s\n", rank, what, cudaGetErrorString(e));
  return -1;
}
#endif

/* bytes of zeroes: on the host, or on device rank % devices with a
 * non-blocking stream.  0 or -1 (said). */
static int tune_mem_open(tune_mem *m, int cuda, int rank, int ndev, size_t bytes) {
  *m = (tune_mem){cuda, rank, NULL, NULL};
  if (!cuda) return (m->buf = calloc(1, bytes)) != NULL ? 0 : -1;
#ifdef KOLO_HAVE_CUDA
  cudaStream_t s = NULL;
  if (cuda_ok(cudaSetDevice(ndev > 0 ? rank % ndev : 0), rank, "cudaSetDevice") != 0 ||
      cuda_ok(cudaMalloc(&m->buf, bytes), rank, "cudaMalloc") != 0 ||
      cuda_ok(cudaMemset(m->buf, 0, bytes), rank, "cudaMemset") != 0 ||
      cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank, "cudaStreamCreate") != 0)
    return -1;
  m->stream = s;
  return 0;
#else
  (void)ndev;
  fprintf(stderr, "kolo-perf tune: rank %d: --mem cuda, but this build has no CUDA\n", rank);
  return -1;
#endif
}

/* Waits for the calls issued on m's stream; -1 when one failed. */
static int tune_mem_sync(tune_mem *m, koloComm_t comm) {
  if (!m->cuda) return 0;
#ifdef KOLO_HAVE_CUDA
  if (cuda_ok(cudaStreamSynchronize((cudaStream_t)m->stream), m->rank, "cudaStreamSynchronize") != 0) return -1;
#endif
  koloResult_t async = koloSuccess;
  if (koloCommGetAsyncError(comm, &async) != koloSuccess) return -1;
  return async == koloSuccess || async == koloInProgress ? 0 : -1;
}

/* The max over the ranks of *flag; on a device it is copied in, reduced and
 * copied out.  0 or -1. */
static int tune_mem_flag(tune_mem *m, uint8_t *flag, koloComm_t comm) {
  if (!m->cuda) return koloAllReduce(flag, flag, 1, koloUint8, koloMax, comm, NULL) == koloSuccess ? 0 : -1;
#ifdef KOLO_HAVE_CUDA
  cudaStream_t s = (cudaStream_t)m->stream;
  if (cuda_ok(cudaMemcpyAsync(m->buf, flag, 1, cudaMemcpyHostToDevice, s), m->rank, "cudaMemcpyAsync") != 0 ||
      koloAllReduce(m->buf, m->buf, 1, koloUint8, koloMax, comm, m->stream) != koloSuccess ||
      cuda_ok(cudaMemcpyAsync(flag, m->buf, 1, cudaMemcpyDeviceToHost, s), m->rank, "cudaMemcpyAsync") != 0)
    return -1;
  return tune_mem_sync(m, comm);
#else
  return -1;
#endif
}

static void tune_mem_close(tune_mem *m) {
  if (!m->cuda) free(m->buf);
#ifdef KOLO_HAVE_CUDA
  else {
    if (m->stream != NULL) cudaStreamDestroy((cudaStream_t)m->stream);
    if (m->buf != NULL) cudaFree(m->buf);
  }
#endif
}

/* One call of `coll` on `bytes` (an all-gather's per rank) in place in m's
 * buffer; the root is rank 0. */
static koloResult_t call_once(koloComm_t comm, tune_mem *m, int coll, size_t bytes, int rank) {
  if (coll == KOLO_COLL_BROADCAST) return koloBroadcast(m->buf, m->buf, bytes, koloUint8, 0, comm, m->stream);
  if (coll == KOLO_COLL_REDUCE) return koloReduce(m->buf, m->buf, bytes, koloUint8, koloSum, 0, comm, m->stream);
  if (coll == KOLO_COLL_ALL_GATHER)
    return koloAllGather((char *)m->buf + (size_t)rank * bytes, m->buf, bytes, koloUint8, comm, m->stream);
  return koloAllReduce(m->buf, m->buf, bytes, koloUint8, koloSum, comm, m->stream);
}

/* n calls of `bytes`, waited for: 0 or -1. */
static int calls(koloComm_t comm, tune_mem *m, int coll, size_t bytes, int n, int rank) {
  for (int i = 0; i < n; i++)
    if (call_once(comm, m, coll, bytes, rank) != koloSuccess) return -1;
  return tune_mem_sync(m, comm);
}

/* Seconds per call of `bytes`, after min(iters, 16) warm-up calls (a pipe's
 * 8 slots of shared memory fault their pages in on first use). */
static double time_calls(koloComm_t comm, tune_mem *m, int coll, size_t bytes, int iters, int rank) {
  if (calls(comm, m, coll, bytes, iters < 16 ? iters : 16, rank) != 0) return -1;
  double t0 = perf_now_us() * 1e-6;
  if (calls(comm, m, coll, bytes, iters, rank) != 0) return -1;
  return (perf_now_us() * 1e-6 - t0) / iters;
}

/* Small all-reduces for 50 ms of rank 0's clock (each carries whether it
 * wants another): the ranks of the job before may still be leaving (the
 * first size of a job ran up to 200x slow without). */
static int warm_up(koloComm_t comm, tune_mem *m, int rank) {
  const double t0 = perf_now_us() * 1e-6;
  for (uint8_t more = 1; more;) {
    more = rank == 0 && perf_now_us() * 1e-6 - t0 < 0.05;
    if (tune_mem_flag(m, &more, comm) != 0) return -1;
  }
  return 0;
}

/* The environment of a rank of job j.  Across a network the ranks meet over
 * it with KOLO_NET_FORCE, not separate KOLO_HOSTIDs: kolo must still see that
 * they share this machine's CPUs, or its waits spin on CPUs others need. */
static void job_env(const tune_args *a, const tune_job *j) {
  const int one_host = j->link == KOLO_LINK_SHM || j->link == KOLO_LINK_CUDA_P2P;
  setenv("KOLO_HOSTID", "tune", 1);
  if (!one_host) {
    setenv("KOLO_NET_FORCE", "1", 1);
    setenv("KOLO_NET", j->link == KOLO_LINK_IB ? "ib" : "socket", 1);
  }
  setenv("KOLO_MEMORY", a->cuda ? "cuda" : "host", 1);
  setenv("KOLO_ALGO", j->algo, 1);
  if (j->tuning != NULL) setenv("KOLO_TUNING_FILE", j->tuning, 1);
  else unsetenv("KOLO_TUNING_FILE");
  if (j->chunk != 0) {
    char chunk[32];
    snprintf(chunk, sizeof chunk, "%zu", j->chunk);
    setenv("KOLO_NET_CHUNK_BYTES", chunk, 1);
  }
}

/* The job's id in rank `rank`: rank 0 makes it after every fork (forking
 * after koloGetUniqueId copies its root thread's state: under ASan children
 * hung on a lock that thread held) and hands it on through idp. */
static int rank_id(int rank, int nranks, const int idp[2], koloUniqueId *id) {
  if (rank != 0) {
    close(idp[1]);
    return perf_read_full(idp[0], id, sizeof *id);
  }
  close(idp[0]);
  int ok = koloGetUniqueId(id) == koloSuccess;
  for (int r = 1; ok && r < nranks; r++) ok = write(idp[1], id, sizeof *id) == (ssize_t)sizeof *id;
  close(idp[1]);
  return ok ? 0 : -1;
}

/* One forked rank: its id, then the job's times to fd (rank 0 only). */
static int rank_main(const tune_args *a, const tune_job *j, int rank, const int idp[2], int fd) {
  koloUniqueId id;
  if (rank_id(rank, a->nranks, idp, &id) != 0) return 1;
  job_env(a, j);
  size_t most = 8;
  for (int i = 0; i < j->nsizes; i++) most = j->sizes[i] > most ? j->sizes[i] : most;
  if (j->coll == KOLO_COLL_ALL_GATHER) most *= (size_t)a->nranks; /* the whole output */
  tune_mem m;
  if (tune_mem_open(&m, a->cuda, rank, a->ndev, most) != 0) return 1; /* before init: the device is set */
  koloComm_t comm;
  if (koloCommInitRank(&comm, a->nranks, id, rank) != koloSuccess) return tune_mem_close(&m), 1;
  double t[TUNE_MAX_SIZES];
  const size_t tbytes = (size_t)j->nsizes * sizeof t[0];
  int bad = warm_up(comm, &m, rank) != 0;
  for (int i = 0; i < j->nsizes && !bad; i++)
    bad = (t[i] = time_calls(comm, &m, j->coll, j->sizes[i], j->iters[i], rank)) < 0;
  if (!bad && rank == 0) bad = write(fd, t, tbytes) != (ssize_t)tbytes;
  if (bad) koloCommAbort(comm); /* peers stop waiting */
  else koloCommDestroy(comm);
  tune_mem_close(&m);
  return bad;
}

/* This process only forks and waits: every fork is of a single thread. */
int perf_tune_measure(const tune_args *a, const tune_job *j, double *t) {
  int fds[2], idp[2], ok = 1;
  if (pipe(fds) != 0) return -1;
  if (pipe(idp) != 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  for (int r = 0; r < a->nranks; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      _exit(rank_main(a, j, r, idp, fds[1]));
    }
    ok &= pid > 0;
  }
  close(idp[0]);
  close(idp[1]);
  close(fds[1]);
  ok &= perf_read_full(fds[0], t, (size_t)j->nsizes * sizeof t[0]) == 0;
  close(fds[0]);
  for (int status, r = 0; r < a->nranks; r++) ok &= wait(&status) > 0 && WIFEXITED(status) && !WEXITSTATUS(status);
  return ok ? 0 : -1;
}

/* Solves the ring's T(S) for alpha (us) and beta (GB/s). */
static void fit(const tune_args *a, const double t[2], kolo_tune_link *l) {
  double n = a->nranks, steps = 2 * (n - 1), a_s = t[0] / steps;
  double wire = t[1] - steps * a_s;
  if (wire <= 0) wire = t[1]; /* the large call no slower than its latency: bound b by it */
  l->alpha_us = a_s * 1e6 > 1e-3 ? a_s * 1e6 : 1e-3;
  l->beta_gbs = steps / n * (double)a->big / wire / 1e9;
  l->set = 1;
}

static int parse(int argc, char **argv, tune_args *a) {
  *a = (tune_args){2, 50, (size_t)64 << 20, "kolo-tuning.txt", 0, 0, 0, 0};
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "-P") == 0 && i + 1 < argc) {
      if (perf_parse_int(argv[++i], 2, 64, &a->nranks) == 0) continue;
      fprintf(stderr, "kolo-perf tune: -P %s: ranks are a whole number from 2 to 64\n", argv[i]);
      return -1;
    } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) a->out = argv[++i];
    else if (strcmp(argv[i], "--quick") == 0) a->iters = 3, a->big = (size_t)1 << 20, a->quick = 1;
    else if (strcmp(argv[i], "--no-net") == 0) a->no_net = 1;
    else if (strcmp(argv[i], "--mem") == 0 && i + 1 < argc && !strcmp(argv[i + 1], "cuda")) a->cuda = 1, i++;
    else if (strcmp(argv[i], "--mem") == 0 && i + 1 < argc && !strcmp(argv[i + 1], "host")) a->cuda = 0, i++;
    else {
      fprintf(stderr, "usage: kolo-perf tune [-P RANKS (2..64)] [-o FILE] [--quick] [--mem host|cuda] [--no-net]\n");
      return strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0 ? 1 : -1;
    }
  }
  return 0;
}

/* 1 when kolo's ib provider has a port here (KOLO_IB_HCA applied), else 0 with why. */
static int ib_usable(char *why, size_t len) {
#ifdef KOLO_HAVE_IBVERBS
  kolo_ib_port port;
  int n = 0;
  why[0] = '\0';
  if (kolo_ib_ports(&port, 1, &n, why, len, NULL) == koloSuccess && n > 0) return 1;
  if (why[0] == '\0') snprintf(why, len, "no usable RDMA port");
#else
  snprintf(why, len, "this build has no ibverbs");
#endif
  return 0;
}

/* The ring's latency and bandwidth on each transport into f: shm, socket,
 * and ib where a port is usable; --mem cuda: cuda-p2p alone. */
static int fit_links(const tune_args *a, kolo_tuning *f) {
  int links[] = {KOLO_LINK_SHM, KOLO_LINK_SOCKET, KOLO_LINK_IB}, nlinks = 3;
  char why[256];
  if (a->cuda) links[0] = KOLO_LINK_CUDA_P2P, nlinks = 1;
  else if (!ib_usable(why, sizeof why)) {
    printf("ib       not measured: %s\n", why);
    nlinks = 2;
  }
  for (int i = 0; i < nlinks; i++) {
    tune_job j = {links[i], "ring", 2, {8, a->big}, {a->iters * 10, a->iters}, NULL, KOLO_COLL_ALL_REDUCE, 0};
    double t[2];
    if (perf_tune_measure(a, &j, t) != 0) {
      fprintf(stderr, "kolo-perf tune: %s: the ranks failed (KOLO_DEBUG=WARN says why)\n", kolo_link_name(links[i]));
      return -1;
    }
    fit(a, t, &f->link[links[i]]);
    printf("%-8s 8 B all-reduce %9.2f us, %zu B %9.2f us -> alpha %.3g us, beta %.3g GB/s\n", kolo_link_name(links[i]),
           t[0] * 1e6, a->big, t[1] * 1e6, f->link[links[i]].alpha_us, f->link[links[i]].beta_gbs);
  }
  return 0;
}

/* --mem cuda: the visible devices, asked from a child (this process forks
 * the ranks and must make no CUDA call first).  0, or -1 said. */
static int count_devices(tune_args *a) {
#ifdef KOLO_HAVE_CUDA
  char why[256];
  if (perf_cuda_probe(1, &a->ndev, why, sizeof why) == 0) return 0;
  fprintf(stderr, "kolo-perf tune --mem cuda: no device: %s\n", why);
#else
  (void)a;
  fprintf(stderr, "kolo-perf tune --mem cuda: this build has no CUDA\n");
#endif
  return -1;
}

/* The host's load average over the last minute before the tune ran (its
 * own ranks raise it after), said and kept in the file's first comment:
 * other work on the CPUs skews every figure the fits and crossovers take.
 * -1 when /proc cannot tell. */
static double load_before(long cpus) {
  double load = -1;
  FILE *f = fopen("/proc/loadavg", "re");
  if (f == NULL || fscanf(f, "%lf", &load) != 1) load = -1;
  if (f != NULL) fclose(f);
  if (load > 0.25 * (double)cpus)
    fprintf(stderr, "kolo-perf tune: warning: the host is busy (load average %.2f over the last minute, %ld CPUs): "
                    "other work skews the figures; tune on a quiet host\n", load, cpus);
  return load;
}

int perf_tune_main(int argc, char **argv) {
  tune_args a;
  int r = parse(argc, argv, &a);
  if (r != 0) return r > 0 ? 0 : 2;
  if (a.cuda && count_devices(&a) != 0) return 1;
  long cpus = kolo_host_cpus();
  double load = load_before(cpus);
  kolo_tuning f = {0};
  if (fit_links(&a, &f) != 0 || perf_tune_chunk(&a, &f) != 0 || perf_tune_crossovers(&a, &f) != 0) return 1;
  FILE *out = fopen(a.out, "w");
  char note[320], across[64] = "";
  if (!a.cuda && !a.no_net)
    snprintf(across, sizeof across, ", their algorithms and chunk across hosts on %s",
             f.link[KOLO_LINK_IB].set ? "ib" : "socket");
  snprintf(note, sizeof note,
           "kolo-perf tune -P %d%s: ring all-reduce fits (%s); all-reduce, broadcast, reduce and all-gather algorithms and "
           "channels on %s%s; load average %.2f, %ld CPUs",
           a.nranks, a.cuda ? " --mem cuda" : "",
           a.cuda ? "cuda-p2p" : f.link[KOLO_LINK_IB].set ? "shm, socket, ib" : "shm, socket; ib not measured",
           a.cuda ? "cuda-p2p" : "shm", across, load, cpus);
  if (out == NULL || kolo_tuning_write(out, &f, note) != 0 || fclose(out) != 0) {
    perror(a.out);
    return 1;
  }
  printf("wrote %s (KOLO_TUNING_FILE=%s loads it)\n", a.out, a.out);
  return 0;
}
