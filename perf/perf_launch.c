/* perf_launch.c - where kolo-perf's ranks come from (see perf_ranks.h):
 * a launcher's job, forked processes or threads of this process; the
 * header's words on the library, memory and timing; and the check that
 * there is a CUDA device before any rank asks for one. */
#include "perf/perf_ranks.h"

#include <stdio.h>

#include "kolo.h"
#include "perf/perf_cuda.h"

/* The memory line of the table's header: on kolo's CPU model of the GPU
 * (-DKOLO_CUDA=SIM) the figures are the model's, never a GPU's. */
#ifdef KOLO_CUDA_SIM
#define CUDA_MEMORY_NAME "cuda on kolo's CPU model of the GPU (MODEL FIGURES: CPU time, not a GPU's)"
#else
#define CUDA_MEMORY_NAME "cuda"
#endif

static const char *library_name(void) {
  static char name[32];
  int v = 0;
  if (koloGetVersion(&v) != koloSuccess) v = KOLO_VERSION_CODE;
  snprintf(name, sizeof name, "kolo %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
  return name;
}

int perf_cuda_ready(const perf_args *a, int fork_first) {
#ifdef KOLO_HAVE_CUDA
  char why[256];
  int n = 0;
  if (perf_cuda_probe(fork_first, &n, why, sizeof why) != 0) {
    fprintf(stderr, "kolo-perf: no CUDA device: %s\n", why);
    return -1;
  }
  for (int i = 0; i < a->ndevs; i++) {
    if (a->devs[i] < n) continue;
    fprintf(stderr, "kolo-perf: --devices: there is no device %d (%d visible)\n", a->devs[i], n);
    return -1;
  }
  return 0;
#else
  (void)fork_first;
  fprintf(stderr,
          "kolo-perf: %s: this build has no CUDA (nvcc was not found when it was configured, or "
          "KOLO_CUDA=OFF)\n",
          a->prims ? "prims" : "--mem cuda");
  return -1;
#endif
}

/* The header's word on how times were taken; NULL for host memory with
 * the defaults (the wall clock around the calls, the slowest rank's). */
static const char *timing_note(const perf_args *a) {
  static char note[400];
  static const char *const average_words[] = {"rank 0's", "the ranks' mean", "the fastest rank's",
                                              "the slowest rank's"};
  const char *how = "per call, the wall clock around the -n iterations (ranks start together)";
  if (a->mem_cuda && a->graph_launches > 0)
    how = "per call within a CUDA graph: the -n x -m calls of a size captured into one graph per rank after the "
          "warm-up, launched -G times, cudaEvents on the rank's stream around the launches";
  else if (a->mem_cuda)
    how = "per call, cudaEvents on each rank's stream around the -n iterations after the warm-up (ranks start "
          "together)";
  if (!a->mem_cuda && a->average == PERF_AVERAGE_MAX && a->agg_iters == 1 && a->blocking == 0 &&
      !a->report_cputime)
    return NULL;
  snprintf(note, sizeof note, "%s%s%s; %s", how, a->agg_iters > 1 ? ", -m calls per iteration as one group" : "",
           a->blocking == PERF_BLOCKING_OUTER ? ", the calls alone (-z 3: barriers left out)" : "",
           average_words[a->average & 3]);
  return note;
}

/* The ranks of the sweep (or of overlap): a launcher's, forked, or threads here. */
int perf_run_ranks(perf_args *a) {
  perf_config cfg = {"kolo-perf", library_name(), "threads", a->mem_cuda ? CUDA_MEMORY_NAME : "host", 0, a->procs,
                     perf_local_ranks(a), timing_note(a)};
  int world = 0;
  const char *var = a->procs_given ? NULL : perf_launcher_size_var(&world);
  static char launch[64];
  if (a->mem_cuda && perf_cuda_ready(a, var == NULL && a->procs > 1) != 0) return 2;
  if (var != NULL) {
    snprintf(launch, sizeof launch, "launcher: %s", var);
    cfg.launch = launch;
    cfg.nranks = cfg.procs = world;
    cfg.threads = 1;
    return perf_run_launched(a, &cfg);
  }
  cfg.nranks = a->procs * perf_local_ranks(a);
  if (a->procs == 1) return perf_run_local(a, &cfg);
  cfg.launch = "forked";
  return perf_run_forked(a, &cfg);
}

