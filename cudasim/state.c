/* state.c - the model's settings, its one lock, per-thread state (current
 * device, last error) and CUDA's error reporting rules. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cudasim/sim.h"

pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t sim_changed = PTHREAD_COND_INITIALIZER;
sim_settings sim_cfg;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static cudaError_t init_result = cudaSuccess;
static int forked_child; /* set in a child forked after the model started */
static int ub_count;

static _Thread_local sim_thread_state thread_state;

sim_thread_state *sim_thread(void) { return &thread_state; }

uint64_t sim_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* An integer setting in [lo, hi]; a bad value is reported and the default
 * kept (the model must not silently run a different machine). */
static long env_long(const char *name, long def, long lo, long hi) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0') return def;
  char *end = NULL;
  errno = 0;
  long x = strtol(v, &end, 0);
  if (errno != 0 || *end != '\0' || x < lo || x > hi) {
    fprintf(stderr, "kolo cuda model: %s=%s is not an integer in [%ld, %ld]; using %ld\n", name, v, lo, hi, def);
    return def;
  }
  return x;
}

static void child_after_fork(void) { forked_child = 1; }

void sim_memory_sweep(void);      /* memory.c: segments of dead processes */
void sim_watchdog_start(int secs); /* stream.c */
void sim_fault_read_env(void);     /* fault.c */

/* KOLO_SIM_SEED: any 64-bit value; 0 (or unset) keeps the fixed order. */
static uint64_t env_seed(void) {
  const char *v = getenv("KOLO_SIM_SEED");
  if (v == NULL || *v == '\0') return 0;
  char *end = NULL;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 0);
  if (errno == 0 && *end == '\0') return x;
  fprintf(stderr, "kolo cuda model: KOLO_SIM_SEED=%s is not an integer; using the fixed order\n", v);
  return 0;
}

static void read_settings(void) {
  sim_cfg.ndevices = (int)env_long("KOLO_SIM_GPUS", 2, 0, SIM_MAX_DEVICES);
  sim_cfg.sms = (int)env_long("KOLO_SIM_SMS", 132, 1, 1024);
  sim_cfg.queues = (int)env_long("CUDA_DEVICE_MAX_CONNECTIONS", 8, 1, SIM_MAX_QUEUES);
  sim_cfg.block_threads = (int)env_long("KOLO_SIM_BLOCK_THREADS", 8, 1, 1024);
  sim_cfg.mem_bytes = (size_t)env_long("KOLO_SIM_MEM_MIB", 16384, 1, 1 << 24) << 20;
  /* A GPU's launch queue holds about a thousand kernels before the host blocks. */
  sim_cfg.max_pending = (int)env_long("KOLO_SIM_MAX_PENDING", 1024, 1, 1 << 20);
  sim_cfg.seed = env_seed();
  kolo_sim_weak_mode = (int)env_long("KOLO_SIM_WEAK", 0, 0, 1);
  sim_fault_read_env();
  const char *ub = getenv("KOLO_SIM_ON_UB");
  sim_cfg.ub_abort = !(ub != NULL && strcmp(ub, "count") == 0);
}

static void init_model(void) {
  read_settings();
  /* 2 ms: a GPU's slice is about 1-2 ms; the longer end, as a pass of the
   * model's runners (to every thread's next poll) and their idle sleeps
   * (up to 200 us) are slower than a GPU's context switch. */
  sim_share_init(env_long("KOLO_SIM_TIMESLICE_US", 2000, 100, 1000000));
  sim_apart_init();
  pthread_atfork(NULL, NULL, child_after_fork);
  sim_memory_sweep();
  sim_watchdog_start((int)env_long("KOLO_SIM_WATCHDOG_S", 0, 0, 86400));
  if (sim_cfg.ndevices == 0) init_result = cudaErrorNoDevice;
}

cudaError_t sim_init(void) {
  pthread_once(&init_once, init_model);
  /* CUDA cannot be used in a child forked after it was initialized. */
  if (forked_child) return cudaErrorInitializationError;
  return init_result;
}

void sim_name_thread(pthread_t th, const char *what) {
  char name[16];
  snprintf(name, sizeof name, SIM_THREAD_PREFIX "%s", what);
  pthread_setname_np(th, name); /* a name is a help only: its failure is not an error */
}

/* A NotReady is an answer, not an error: a GPU leaves the last error as it
 * was (seen on an H200, CUDA 13.0). */
cudaError_t sim_ret(cudaError_t e) {
  if (e != cudaSuccess && e != cudaErrorNotReady) thread_state.last_error = e;
  return e;
}

void sim_undefined(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "kolo cuda model: UNDEFINED BEHAVIOUR in CUDA's terms (pid %d): %s\n", (int)getpid(), msg);
  __atomic_add_fetch(&ub_count, 1, __ATOMIC_SEQ_CST);
  if (sim_cfg.ub_abort) abort();
}

int kolo_sim_undefined_count(void) { return __atomic_load_n(&ub_count, __ATOMIC_SEQ_CST); }
int kolo_sim_active(void) { return 1; }

/* A sticky error is not cleared by reading it: the context stays lost. */
cudaError_t cudaGetLastError(void) {
  cudaError_t sticky = sim_sticky_current();
  if (sticky != cudaSuccess) return sim_ret(sticky);
  cudaError_t e = thread_state.last_error;
  thread_state.last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) {
  cudaError_t sticky = sim_sticky_current();
  return sticky != cudaSuccess ? sim_ret(sticky) : thread_state.last_error;
}

void kolo_sim_set_seed(uint64_t seed) {
  sim_init();
  __atomic_store_n(&sim_cfg.seed, seed, __ATOMIC_RELAXED);
}

uint64_t sim_mix(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

cudaError_t cudaRuntimeGetVersion(int *v) {
  if (v == NULL) return sim_ret(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v) {
  if (v == NULL) return sim_ret(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}

/* ---- error names and strings ---------------------------------------------- */

#define SIM_ERRORS(X)                                                                        \
  X(cudaSuccess, "no error")                                                                 \
  X(cudaErrorInvalidValue, "invalid argument")                                               \
  X(cudaErrorMemoryAllocation, "out of memory")                                              \
  X(cudaErrorInitializationError, "initialization error")                                    \
  X(cudaErrorCudartUnloading, "driver shutting down")                                        \
  X(cudaErrorInvalidConfiguration, "invalid configuration argument")                         \
  X(cudaErrorInvalidSymbol, "invalid device symbol")                                         \
  X(cudaErrorInvalidDevicePointer, "invalid device pointer")                                 \
  X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                    \
  X(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version") \
  X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                 \
  X(cudaErrorInvalidDevice, "invalid device ordinal")                                        \
  X(cudaErrorDeviceUninitialized, "invalid device context")                                  \
  X(cudaErrorMapBufferObjectFailed, "mapping of buffer object failed")                       \
  X(cudaErrorInvalidResourceHandle, "invalid resource handle")                               \
  X(cudaErrorIllegalState, "the operation cannot be performed in the present state")         \
  X(cudaErrorNotReady, "device not ready")                                                   \
  X(cudaErrorIllegalAddress, "an illegal memory access was encountered")                     \
  X(cudaErrorLaunchOutOfResources, "too many resources requested for launch")                \
  X(cudaErrorLaunchTimeout, "the launch timed out and was terminated")                       \
  X(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled")                     \
  X(cudaErrorPeerAccessNotEnabled, "peer access has not been enabled")                       \
  X(cudaErrorInvalidDeviceFunction, "invalid device function")                               \
  X(cudaErrorNotSupported, "operation not supported")                                        \
  X(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped") \
  X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing")    \
  X(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture") \
  X(cudaErrorStreamCaptureUnmatched, "capture was not initiated in this stream")             \
  X(cudaErrorStreamCaptureUnjoined, "capturing stream has unjoined work")                    \
  X(cudaErrorStreamCaptureImplicit, "operation would make the legacy stream depend on a capturing blocking stream") \
  X(cudaErrorStreamCaptureWrongThread, "attempt to terminate a thread-local capture sequence from another thread") \
  X(cudaErrorCapturedEvent, "operation not permitted on an event last recorded in a capturing stream") \
  X(cudaErrorContextIsDestroyed, "context is destroyed")                                     \
  X(cudaErrorLaunchFailure, "unspecified launch failure")                                    \
  X(cudaErrorUnknown, "unknown error")

const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define SIM_NAME(code, text) \
  case code: return #code;
    SIM_ERRORS(SIM_NAME)
#undef SIM_NAME
  default: return "cudaErrorUnknown";
  }
}

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
#define SIM_TEXT(code, text) \
  case code: return text;
    SIM_ERRORS(SIM_TEXT)
#undef SIM_TEXT
  default: return "unrecognized error code";
  }
}
