/* perf_compute.c - calibrated compute for kolo-perf overlap (see perf_compute.h). */
#define _GNU_SOURCE /* clock_nanosleep, prctl */
#include "perf/perf_compute.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "perf/perf_sweep.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* Spin calibration: rounds of this many iterations, the fastest one counts. */
#define CAL_ITERS (1u << 22)
#define CAL_ROUNDS 7

static const char *const names[PERF_COMPUTE_KINDS] = {"spin", "sleep", "cuda"};

const char *perf_compute_name(perf_compute_kind k) { return (unsigned)k < PERF_COMPUTE_KINDS ? names[k] : "?"; }

/* A dependent chain (an LCG): each iteration waits for the last, so the
 * rate does not depend on what the compiler vectorizes. */
static uint64_t spin(uint64_t x, uint64_t iters) {
  for (uint64_t i = 0; i < iters; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(x)); /* keep the loop: one step per iteration */
  }
  return x;
}

static int calibrate_spin(perf_compute *c) {
  double best = 0;
  for (int r = 0; r < CAL_ROUNDS; r++) {
    double t0 = perf_now_us();
    c->sink = spin(c->sink, CAL_ITERS);
    double dt = perf_now_us() - t0;
    if (dt > 0 && CAL_ITERS / dt > best) best = CAL_ITERS / dt;
  }
  if (best <= 0) {
    fprintf(stderr, "kolo-perf: spin calibration failed: the clock did not move\n");
    return -1;
  }
  c->per_us = best;
  return 0;
}

#ifdef KOLO_HAVE_CUDA
static int cuda_fail(cudaError_t err, const char *what) {
  if (err == cudaSuccess) return 0;
  fprintf(stderr, "kolo-perf: %s failed: %s\n", what, cudaGetErrorString(err));
  return -1;
}

static int busy(void *stream, long long cycles) {
  if (perf_busy_launch(stream, cycles) == 0) return 0;
  fprintf(stderr, "kolo-perf: busy kernel launch failed: %s\n", cudaGetErrorString(cudaGetLastError()));
  return -1;
}

/* Cycles per us of the busy kernel: a 2^24-cycle kernel timed with events,
 * the median of 5 (after one untimed launch). */
static int calibrate_cuda(perf_compute *c) {
  const long long cycles = 1ll << 24;
  cudaStream_t s = (cudaStream_t)c->stream;
  cudaEvent_t e0 = NULL, e1 = NULL;
  float ms[5];
  int rc = 0;
  if (cuda_fail(cudaEventCreate(&e0), "cudaEventCreate") || cuda_fail(cudaEventCreate(&e1), "cudaEventCreate") ||
      busy(s, cycles))
    rc = -1;
  for (int i = 0; rc == 0 && i < 5; i++)
    if (cuda_fail(cudaEventRecord(e0, s), "cudaEventRecord") || busy(s, cycles) ||
        cuda_fail(cudaEventRecord(e1, s), "cudaEventRecord") ||
        cuda_fail(cudaEventSynchronize(e1), "cudaEventSynchronize") ||
        cuda_fail(cudaEventElapsedTime(&ms[i], e0, e1), "cudaEventElapsedTime"))
      rc = -1;
  for (int i = 1; rc == 0 && i < 5; i++) /* insertion sort: the median */
    for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
      float t = ms[j];
      ms[j] = ms[j - 1];
      ms[j - 1] = t;
    }
  if (rc == 0 && ms[2] <= 0) {
    fprintf(stderr, "kolo-perf: busy kernel calibration: zero time\n");
    rc = -1;
  }
  if (rc == 0) c->per_us = (double)cycles / ((double)ms[2] * 1e3);
  if (e1) cudaEventDestroy(e1);
  if (e0) cudaEventDestroy(e0);
  return rc;
}
#endif

int perf_compute_init(perf_compute *c, perf_compute_kind kind, void *stream) {
  memset(c, 0, sizeof *c);
  c->kind = kind;
  c->stream = stream;
  c->sink = 0x9e3779b97f4a7c15ull;
  switch (kind) {
    case PERF_COMPUTE_SPIN: return calibrate_spin(c);
    case PERF_COMPUTE_SLEEP:
      /* wake-ups at the deadline, not up to 50 us later (the default slack) */
      if (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) != 0)
        fprintf(stderr, "kolo-perf: warning: PR_SET_TIMERSLACK: %s (sleeps may wake late)\n", strerror(errno));
      return 0;
    case PERF_COMPUTE_CUDA:
#ifdef KOLO_HAVE_CUDA
      return calibrate_cuda(c);
#else
      fprintf(stderr, "kolo-perf: cuda compute: this build has no CUDA\n");
      return -1;
#endif
    default: fprintf(stderr, "kolo-perf: unknown compute kind %d\n", (int)kind); return -1;
  }
}

void perf_compute_begin(perf_compute *c) {
  c->start_us = perf_now_us();
  c->due_us = 0;
}

static int sleep_until(double when_us) {
  long long ns = (long long)(when_us * 1e3);
  struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000), .tv_nsec = (long)(ns % 1000000000)};
  int err;
  while ((err = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) == EINTR) {
  }
  if (err != 0) fprintf(stderr, "kolo-perf: clock_nanosleep: %s\n", strerror(err));
  return err != 0 ? -1 : 0;
}

int perf_compute_layer(perf_compute *c, double us) {
  if (us <= 0) return 0;
  switch (c->kind) {
    case PERF_COMPUTE_SPIN: c->sink = spin(c->sink, (uint64_t)(us * c->per_us + 0.5)); return 0;
    case PERF_COMPUTE_SLEEP:
      c->due_us += us;
      return c->start_us + c->due_us > perf_now_us() ? sleep_until(c->start_us + c->due_us) : 0;
    case PERF_COMPUTE_CUDA:
#ifdef KOLO_HAVE_CUDA
      return busy(c->stream, (long long)(us * c->per_us + 0.5));
#endif
    default: return -1;
  }
}

int perf_compute_sync(perf_compute *c) {
#ifdef KOLO_HAVE_CUDA
  if (c->kind == PERF_COMPUTE_CUDA)
    return cuda_fail(cudaStreamSynchronize((cudaStream_t)c->stream), "cudaStreamSynchronize");
#else
  (void)c;
#endif
  return 0;
}
