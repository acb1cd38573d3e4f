/* perf_cuda.c - device probe and names for kolo-perf (see perf_cuda.h). */
#define _GNU_SOURCE /* fork, pipe */
#include "perf/perf_cuda.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf/perf_pipe.h"

/* What the probe child sends back. */
typedef struct {
  int err; /* cudaError_t of cudaGetDeviceCount */
  int ndev;
  char text[200];
} probe_answer;

static void ask(probe_answer *p) {
  memset(p, 0, sizeof *p);
  cudaError_t err = cudaGetDeviceCount(&p->ndev);
  p->err = (int)err;
  if (err != cudaSuccess) snprintf(p->text, sizeof p->text, "%s", cudaGetErrorString(err));
  else if (p->ndev < 1) snprintf(p->text, sizeof p->text, "cudaGetDeviceCount found 0 devices");
}

/* Asks in a child; -1 (with `why`) when the child could not answer. */
static int ask_forked(probe_answer *p, char *why, size_t len) {
  int fds[2];
  if (pipe(fds) != 0) {
    snprintf(why, len, "pipe: %s", strerror(errno));
    return -1;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(why, len, "fork: %s", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    close(fds[0]);
    probe_answer mine;
    ask(&mine);
    _exit(perf_write_full(fds[1], &mine, sizeof mine) == 0 ? 0 : 1);
  }
  close(fds[1]);
  int got = perf_read_full(fds[0], p, sizeof *p) == 0;
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got) return 0;
  if (WIFSIGNALED(status))
    snprintf(why, len, "the probe process (cudaGetDeviceCount) was killed by signal %d", WTERMSIG(status));
  else
    snprintf(why, len, "the probe process (cudaGetDeviceCount) ended without an answer");
  return -1;
}

int perf_cuda_probe(int fork_first, int *ndev, char *why, size_t len) {
  probe_answer p;
  if (fork_first) {
    if (ask_forked(&p, why, len) != 0) return -1;
  } else {
    ask(&p);
  }
  p.text[sizeof p.text - 1] = '\0';
  if (p.err != (int)cudaSuccess || p.ndev < 1) {
    snprintf(why, len, "%s", p.text);
    return -1;
  }
  *ndev = p.ndev;
  return 0;
}

void perf_cuda_describe(int dev, char *buf, size_t len) {
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    snprintf(buf, len, "cuda device %d", dev);
    return;
  }
  prop.name[sizeof prop.name - 1] = '\0';
#ifdef KOLO_CUDA_SIM
  /* Never to be read as a GPU's figures (docs/dev/cuda-model.md). */
  snprintf(buf, len, "cuda device %d: CPU MODEL, not a GPU", dev);
#else
  snprintf(buf, len, "cuda device %d [0x%02x] %s", dev, (unsigned)prop.pciBusID, prop.name);
#endif
}
#else
typedef int perf_cuda_empty; /* ISO C wants something in a file */
#endif
