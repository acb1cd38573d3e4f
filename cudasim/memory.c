/* memory.c - device memory, pinned host memory and CUDA IPC in the model.
 *
 * Device memory is not heap memory: each cudaMalloc is its own POSIX
 * shared-memory object (/dev/shm/cudasim-<pid>-<n>), so that another process
 * can map it through cudaIpcOpenMemHandle as CUDA IPC allows.  The mapping
 * is laid out as
 *
 *   [header page][data pages ... | user bytes][guard page, no access]
 *
 * with the user's bytes (rounded up to CUDA's 256-byte alignment) at the
 * end of the data pages, so that a kernel writing past the end of an
 * allocation faults as it would on a GPU, and with fresh bytes poisoned
 * (0xa5), not zero, so that a read of memory nothing wrote shows.  The
 * header page is shared by every process that maps the object: it counts
 * the importers, so that cudaFree of memory still open elsewhere (which CUDA
 * leaves undefined) is caught.  Objects of processes that died are unlinked
 * when the next process starts the model.
 *
 * Pinned host memory (cudaHostAlloc) is anonymous memory; its device pointer
 * is its host pointer, as with unified addressing on a GPU.  The model
 * requires cudaHostAllocMapped for cudaHostGetDevicePointer (stricter than
 * unified addressing, which maps all pinned memory). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cudasim/sim.h"

#define PAGE 4096u
#define SHM_PREFIX "cudasim-"
#define POISON 0xa5
#define HANDLE_MAGIC 0x4d49534bu /* "KSIM" */

#define MAX_IMPORTERS 128
typedef struct {
  uint64_t bytes;
  int32_t owner_pid, device;
  int32_t importers[MAX_IMPORTERS]; /* pids that have it open (0: free slot), CAS'd */
} shm_header;

typedef struct sim_alloc {
  char *ptr;          /* what the user got */
  size_t bytes;       /* what the user asked for */
  char *map;          /* whole mapping (header .. guard) */
  size_t map_bytes;
  int kind, device;
  unsigned host_flags;
  int opens;          /* imported: cudaIpcOpenMemHandle calls not yet closed */
  uint64_t seq;       /* device memory: the object's number */
  int32_t owner_pid;  /* imported: the exporter */
  shm_header *hdr;
  struct sim_alloc *next;
} sim_alloc;

typedef struct {
  uint32_t magic;
  int32_t pid, device, pad;
  uint64_t seq, bytes, offset;
} ipc_handle;
_Static_assert(sizeof(ipc_handle) <= sizeof(cudaIpcMemHandle_t), "IPC handle too large");

_Static_assert(sizeof(shm_header) <= PAGE, "the header must fit its page");

static sim_alloc *allocs;
static uint64_t next_seq;

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static void shm_name(char *out, size_t n, int32_t pid, uint64_t seq) {
  snprintf(out, n, "/" SHM_PREFIX "%d-%llu", (int)pid, (unsigned long long)seq);
}

/* ---- lookups ------------------------------------------------------------- */

static sim_alloc *find_base(const void *p, int kind) {
  for (sim_alloc *a = allocs; a; a = a->next)
    if (a->ptr == p && a->kind == kind) return a;
  return NULL;
}

static sim_alloc *find_inside(const void *p) {
  const char *c = p;
  for (sim_alloc *a = allocs; a; a = a->next)
    if (c >= a->ptr && c < a->ptr + (a->bytes ? a->bytes : 1)) return a;
  return NULL;
}

int sim_mem_kind(const void *p, int *device, size_t *room) {
  pthread_mutex_lock(&sim_lock);
  sim_alloc *a = find_inside(p);
  int kind = 0;
  if (a) {
    kind = a->kind;
    if (device) *device = a->device;
    if (room) *room = a->bytes - (size_t)((const char *)p - a->ptr);
  }
  pthread_mutex_unlock(&sim_lock);
  return kind;
}

static const char *kind_name(int kind) {
  return kind == SIM_MEM_DEVICE ? "cudaMalloc" : kind == SIM_MEM_IMPORTED ? "cudaIpcOpenMemHandle" : "cudaHostAlloc";
}

/* For the report of a refused access (apart.c), in a signal handler: the
 * list is walked even when its lock is busy (the process aborts next). */
void sim_mem_describe(const void *addr, char *out, size_t n) {
  int locked = pthread_mutex_trylock(&sim_lock) == 0;
  const char *c = addr;
  snprintf(out, n, "in no allocation the model knows");
  for (sim_alloc *a = allocs; a; a = a->next)
    if (c >= a->map && c < a->map + a->map_bytes) {
      snprintf(out, n, "byte %td of the %zu-byte %s allocation at %p (device %d)", c - a->ptr, a->bytes,
               kind_name(a->kind), (void *)a->ptr, a->device);
      break;
    }
  if (locked) pthread_mutex_unlock(&sim_lock);
}

/* ---- what kernels may reach ------------------------------------------------ */

/* Bumped whenever an allocation goes: a runner's cached spans stay good
 * until then. */
static uint64_t allocs_gen = 1; /* 0: a cache entry that matches nothing */
#define SPAN_CACHE 4
static _Thread_local struct {
  const char *lo, *hi;
  uint64_t gen;
} span_cache[SPAN_CACHE];
static _Thread_local unsigned span_next;

/* The cache is the runner's, shared by the block's threads (fibers, which
 * ThreadSanitizer sees as threads): relaxed atomics, never torn. */
#define SPAN_LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define SPAN_ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

static int span_cached(const char *c, size_t bytes, uint64_t gen) {
  for (int i = 0; i < SPAN_CACHE; i++)
    if (SPAN_LD(span_cache[i].gen) == gen && c >= SPAN_LD(span_cache[i].lo) &&
        c + bytes <= SPAN_LD(span_cache[i].hi))
      return 1;
  return 0;
}

/* 0: [c, c + bytes) lies in one allocation a kernel may touch; 1: in none
 * (pageable host memory, or none the model made); 2: past its end. */
static int span_verdict(const char *c, size_t bytes, uint64_t gen) {
  pthread_mutex_lock(&sim_lock);
  sim_alloc *a = find_inside(c);
  int verdict = a == NULL ? 1 : c + bytes > a->ptr + a->bytes ? 2 : 0;
  if (verdict == 0) {
    unsigned i = __atomic_fetch_add(&span_next, 1u, __ATOMIC_RELAXED) % SPAN_CACHE;
    SPAN_ST(span_cache[i].gen, (uint64_t)0); /* not matched while half written */
    SPAN_ST(span_cache[i].lo, (const char *)a->ptr), SPAN_ST(span_cache[i].hi, (const char *)a->ptr + a->bytes);
    SPAN_ST(span_cache[i].gen, gen);
  }
  pthread_mutex_unlock(&sim_lock);
  return verdict;
}

static int span_check(const char *c, size_t bytes) {
  uint64_t gen = __atomic_load_n(&allocs_gen, __ATOMIC_ACQUIRE);
  if (span_cached(c, bytes, gen)) return 0;
  return span_verdict(c, bytes, gen);
}

static void span_refused(int verdict, const void *p, size_t bytes, const char *what, const char *file, int line) {
  fprintf(stderr,
          "kolo cuda model: KERNEL ACCESS OUTSIDE DEVICE-REACHABLE MEMORY: %s, %zu bytes at %p, at %s:%d, %s; "
          "a kernel may touch device memory (cudaMalloc, cudaIpcOpenMemHandle) and pinned host memory "
          "(cudaHostAlloc, cudaMallocHost), not pageable host memory: a GPU faults (cudaErrorIllegalAddress)\n",
          what, bytes, p, file, line,
          verdict == 1 ? "in no allocation of the model (pageable host memory?)" : "running past its allocation's end");
  abort();
}

void kolo_sim_global_span(const void *p, size_t bytes, const char *what, const char *file, int line) {
  const char *c = p;
  if (c == NULL || bytes == 0) return;
  int verdict = span_check(c, bytes);
  if (verdict != 0) span_refused(verdict, p, bytes, what, file, line);
}

/* Block-shared storage (KOLO_BLOCK_SHARED) is the runner's thread-local
 * storage: the TLS block of a module in this thread.  The block last found
 * is kept (a thread's TLS does not move while the thread lives). */
static _Thread_local struct {
  const char *lo, *hi;
} tls_hit;

typedef struct {
  const char *c, *lo, *hi;
  size_t bytes;
} tls_query;

static int tls_block_of(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  tls_query *q = arg;
  const char *lo = info->dlpi_tls_data;
  if (lo == NULL) return 0; /* no TLS, or none allocated in this thread yet */
  for (int i = 0; i < info->dlpi_phnum; i++) {
    if (info->dlpi_phdr[i].p_type != PT_TLS) continue;
    const char *hi = lo + info->dlpi_phdr[i].p_memsz;
    if (q->c >= lo && q->c + q->bytes <= hi) {
      q->lo = lo, q->hi = hi;
      return 1;
    }
  }
  return 0;
}

static int in_thread_storage(const char *c, size_t bytes) {
  if (c >= SPAN_LD(tls_hit.lo) && c + bytes <= SPAN_LD(tls_hit.hi)) return 1;
  tls_query q = {c, NULL, NULL, bytes};
  if (!dl_iterate_phdr(tls_block_of, &q)) return 0;
  SPAN_ST(tls_hit.lo, q.lo), SPAN_ST(tls_hit.hi, q.hi);
  return 1;
}

void kolo_sim_block_span(const void *p, size_t bytes, const char *what, const char *file, int line) {
  const char *c = p;
  if (c == NULL || bytes == 0 || in_thread_storage(c, bytes)) return;
  int verdict = span_check(c, bytes);
  if (verdict != 0) span_refused(verdict, p, bytes, what, file, line);
}

static void unlink_alloc(sim_alloc *a) {
  __atomic_add_fetch(&allocs_gen, 1, __ATOMIC_RELEASE);
  for (sim_alloc **pp = &allocs; *pp; pp = &(*pp)->next)
    if (*pp == a) {
      *pp = a->next;
      return;
    }
}

/* ---- mappings ------------------------------------------------------------- */

/* Reserves header + data + guard, then maps fd over header + data (fd < 0:
 * anonymous memory).  Returns the mapping or NULL. */
static char *map_with_guard(int fd, size_t data_pages_bytes, size_t *map_bytes) {
  size_t total = PAGE + data_pages_bytes + PAGE;
  char *m = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return NULL;
  int flags = MAP_FIXED | (fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS);
  if (mmap(m, PAGE + data_pages_bytes, PROT_READ | PROT_WRITE, flags, fd, 0) == MAP_FAILED) {
    munmap(m, total);
    return NULL;
  }
  *map_bytes = total;
  return m;
}

/* The user's bytes: the last round_up(bytes, 256) bytes of the data pages. */
static char *user_ptr(char *map, size_t data_pages_bytes, size_t bytes) {
  return map + PAGE + data_pages_bytes - round_up(bytes, 256);
}

static cudaError_t make_device_alloc(sim_device *d, size_t bytes, sim_alloc *a) {
  size_t data = round_up(round_up(bytes, 256), PAGE);
  char name[64];
  a->seq = __atomic_fetch_add(&next_seq, 1, __ATOMIC_RELAXED);
  shm_name(name, sizeof name, getpid(), a->seq);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return cudaErrorMemoryAllocation;
  /* Reserved now: a full /dev/shm fails the allocation, not a later store. */
  int err = posix_fallocate(fd, 0, (off_t)(PAGE + data));
  char *m = err == 0 ? map_with_guard(fd, data, &a->map_bytes) : NULL;
  close(fd);
  if (m == NULL) {
    shm_unlink(name);
    return cudaErrorMemoryAllocation;
  }
  a->map = m;
  a->ptr = user_ptr(m, data, bytes);
  a->bytes = bytes;
  a->kind = SIM_MEM_DEVICE;
  a->device = d->ordinal;
  a->hdr = (shm_header *)m;
  a->hdr->bytes = bytes;
  a->hdr->owner_pid = getpid();
  a->hdr->device = d->ordinal;
  memset(m + PAGE, POISON, data);
  sim_apart_tag(m + PAGE, data); /* after the poison: from here on, device memory */
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes) {
  if (p == NULL) return sim_ret(cudaErrorInvalidValue);
  *p = NULL;
  sim_device *d;
  cudaError_t e = sim_current(&d);
  if (e == cudaSuccess) e = sim_sticky(d);
  if (e != cudaSuccess) return sim_ret(e);
  if (sim_capture_forbids(NULL)) return sim_ret(cudaErrorStreamCaptureUnsupported);
  if (bytes == 0) return cudaSuccess; /* CUDA hands out NULL for 0 bytes */
  sim_alloc *a = calloc(1, sizeof *a);
  if (a == NULL) return sim_ret(cudaErrorMemoryAllocation);
  pthread_mutex_lock(&sim_lock);
  e = d->mem_used + bytes > sim_cfg.mem_bytes ? cudaErrorMemoryAllocation : make_device_alloc(d, bytes, a);
  if (e == cudaSuccess) {
    d->mem_used += bytes;
    a->next = allocs;
    allocs = a;
    *p = a->ptr;
  }
  pthread_mutex_unlock(&sim_lock);
  if (e != cudaSuccess) free(a);
  return sim_ret(e);
}

/* Whether pid runs.  A zombie (exited, not yet reaped by its parent) does
 * not: the driver released its mappings when it exited, and kill(pid, 0)
 * still succeeds for it. */
static int process_runs(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return 0;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 1; /* no /proc: as kill says */
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold spaces */
  return !(paren && paren[1] == ' ' && paren[2] == 'Z');
}

int sim_process_runs(int pid) { return process_runs(pid); }

/* Processes still alive that have the object open (a killed importer's
 * mapping went with it). */
static unsigned live_importers(const shm_header *h) {
  unsigned n = 0;
  for (int i = 0; i < MAX_IMPORTERS; i++) {
    int32_t pid = __atomic_load_n(&h->importers[i], __ATOMIC_ACQUIRE);
    n += pid > 0 && process_runs(pid);
  }
  return n;
}

static void note_importer(shm_header *h, int32_t pid, int open) {
  for (int i = 0; i < MAX_IMPORTERS; i++) {
    int32_t expected = open ? 0 : pid;
    if (__atomic_compare_exchange_n(&h->importers[i], &expected, open ? pid : 0, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
      return;
  }
}

static void release_device_alloc(sim_alloc *a) {
  unsigned importers = live_importers(a->hdr);
  if (importers != 0)
    sim_undefined("cudaFree of device memory (%zu bytes at %p, device %d) that %u other process(es) still "
                  "have open through cudaIpcOpenMemHandle; CUDA requires the importers to call "
                  "cudaIpcCloseMemHandle first",
                  a->bytes, (void *)a->ptr, a->device, importers);
  char name[64];
  shm_name(name, sizeof name, getpid(), a->seq);
  shm_unlink(name);
  munmap(a->map, a->map_bytes);
}

/* cudaFree waits for all work of the allocation's device: in CUDA it
 * synchronizes, so it also waits for kernels of other streams that spin. */
cudaError_t cudaFree(void *p) {
  sim_device *d;
  cudaError_t e = sim_current(&d);
  if (e != cudaSuccess) return sim_ret(e);
  if (p == NULL) return cudaSuccess;
  if (sim_capture_forbids(NULL)) return sim_ret(cudaErrorStreamCaptureUnsupported);
  pthread_mutex_lock(&sim_lock);
  sim_alloc *a = find_base(p, SIM_MEM_DEVICE);
  pthread_mutex_unlock(&sim_lock);
  if (a == NULL) return sim_ret(cudaErrorInvalidValue);
  sim_device_wait(sim_device_get(a->device));
  pthread_mutex_lock(&sim_lock);
  a = find_base(p, SIM_MEM_DEVICE); /* another thread may have freed it meanwhile */
  if (a) {
    unlink_alloc(a);
    sim_device_get(a->device)->mem_used -= a->bytes;
  }
  pthread_mutex_unlock(&sim_lock);
  if (a == NULL) return sim_ret(cudaErrorInvalidValue);
  cudaError_t sticky = sim_sticky(sim_device_get(a->device));
  release_device_alloc(a);
  free(a);
  /* Freed all the same: the model's memory must not outlive the process
   * (a GPU releases a lost context's memory when the process ends). */
  return sim_ret(sticky);
}

/* ---- pinned host memory ---------------------------------------------------- */

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags) {
  if (p == NULL) return sim_ret(cudaErrorInvalidValue);
  *p = NULL;
  sim_device *d;
  cudaError_t e = sim_current(&d);
  if (e == cudaSuccess) e = sim_sticky(d);
  if (e != cudaSuccess) return sim_ret(e);
  if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
    return sim_ret(cudaErrorInvalidValue);
  if (sim_capture_forbids(NULL)) return sim_ret(cudaErrorStreamCaptureUnsupported);
  if (bytes == 0) return cudaSuccess;
  sim_alloc *a = calloc(1, sizeof *a);
  size_t data = round_up(round_up(bytes, 256), PAGE);
  char *m = a ? map_with_guard(-1, data, &a->map_bytes) : NULL;
  if (m == NULL) {
    free(a);
    return sim_ret(cudaErrorMemoryAllocation);
  }
  a->map = m;
  a->ptr = user_ptr(m, data, bytes);
  a->bytes = bytes;
  a->kind = SIM_MEM_HOST;
  a->device = d->ordinal;
  a->host_flags = flags;
  memset(m + PAGE, POISON, data);
  pthread_mutex_lock(&sim_lock);
  a->next = allocs;
  allocs = a;
  pthread_mutex_unlock(&sim_lock);
  *p = a->ptr;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaHostAlloc(p, bytes, cudaHostAllocDefault); }

/* Pinned memory may be in use by any device's work: wait for all of it. */
static void wait_all_devices(void) {
  for (int i = 0; i < sim_cfg.ndevices; i++) sim_device_wait(sim_device_get(i));
}

cudaError_t cudaFreeHost(void *p) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  if (p == NULL) return cudaSuccess;
  if (sim_capture_forbids(NULL)) return sim_ret(cudaErrorStreamCaptureUnsupported);
  wait_all_devices();
  pthread_mutex_lock(&sim_lock);
  sim_alloc *a = find_base(p, SIM_MEM_HOST);
  if (a) unlink_alloc(a);
  pthread_mutex_unlock(&sim_lock);
  if (a == NULL) return sim_ret(cudaErrorInvalidValue);
  munmap(a->map, a->map_bytes);
  free(a);
  return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned flags) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  if (dev == NULL || flags != 0) return sim_ret(cudaErrorInvalidValue);
  pthread_mutex_lock(&sim_lock);
  sim_alloc *a = find_inside(host);
  int ok = a && a->kind == SIM_MEM_HOST && (a->host_flags & cudaHostAllocMapped);
  pthread_mutex_unlock(&sim_lock);
  if (!ok) return sim_ret(cudaErrorInvalidValue);
  *dev = host;
  return cudaSuccess;
}

/* CUDA 11+: a pointer into no allocation is unregistered host memory
 * (cudaSuccess, device -2 as CUDA reports it); imported IPC memory is
 * device memory of its device. */
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  if (attr == NULL) return sim_ret(cudaErrorInvalidValue);
  int device = -1;
  int kind = sim_mem_kind(ptr, &device, NULL);
  memset(attr, 0, sizeof *attr);
  attr->type = kind == SIM_MEM_HOST ? cudaMemoryTypeHost : kind ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
  attr->device = kind ? device : -2;
  attr->devicePointer = kind ? (void *)(uintptr_t)ptr : NULL;
  attr->hostPointer = kind == SIM_MEM_DEVICE || kind == SIM_MEM_IMPORTED ? NULL : (void *)(uintptr_t)ptr;
  return cudaSuccess;
}

/* ---- IPC ----------------------------------------------------------------------- */

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  if (h == NULL) return sim_ret(cudaErrorInvalidValue);
  pthread_mutex_lock(&sim_lock);
  sim_alloc *a = find_inside(p);
  ipc_handle x;
  memset(&x, 0, sizeof x);
  if (a && a->kind == SIM_MEM_DEVICE)
    x = (ipc_handle){HANDLE_MAGIC, getpid(), a->device, 0, a->seq, a->bytes, (uint64_t)((char *)p - a->ptr)};
  pthread_mutex_unlock(&sim_lock);
  if (x.magic != HANDLE_MAGIC) return sim_ret(cudaErrorInvalidValue);
  memset(h, 0, sizeof *h);
  memcpy(h, &x, sizeof x);
  return cudaSuccess;
}

static sim_alloc *find_import(const ipc_handle *x) {
  for (sim_alloc *a = allocs; a; a = a->next)
    if (a->kind == SIM_MEM_IMPORTED && a->owner_pid == x->pid && a->seq == x->seq) return a;
  return NULL;
}

static cudaError_t map_import(const ipc_handle *x, sim_alloc *a) {
  char name[64];
  shm_name(name, sizeof name, x->pid, x->seq);
  int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return cudaErrorInvalidValue; /* freed by its owner, or never there */
  size_t data = round_up(round_up(x->bytes, 256), PAGE);
  char *m = map_with_guard(fd, data, &a->map_bytes);
  close(fd);
  if (m == NULL) return cudaErrorMapBufferObjectFailed;
  a->map = m;
  a->ptr = user_ptr(m, data, x->bytes);
  a->bytes = x->bytes;
  a->kind = SIM_MEM_IMPORTED;
  a->device = x->device;
  a->seq = x->seq;
  a->owner_pid = x->pid;
  a->hdr = (shm_header *)m;
  a->opens = 1;
  note_importer(a->hdr, getpid(), 1);
  sim_apart_tag(m + PAGE, data);
  return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned flags) {
  if (p == NULL) return sim_ret(cudaErrorInvalidValue);
  *p = NULL;
  sim_device *d;
  cudaError_t e = sim_current(&d);
  if (e != cudaSuccess) return sim_ret(e);
  ipc_handle x;
  memcpy(&x, &h, sizeof x);
  if (x.magic != HANDLE_MAGIC || flags != cudaIpcMemLazyEnablePeerAccess || x.offset >= x.bytes)
    return sim_ret(cudaErrorInvalidValue);
  /* A process cannot open its own handles (CUDA refuses the same context). */
  if (x.pid == getpid()) return sim_ret(cudaErrorDeviceUninitialized);
  pthread_mutex_lock(&sim_lock);
  sim_alloc *a = find_import(&x);
  if (a) { /* opened before by this process: the same pointer, one more reference */
    a->opens++;
  } else if ((a = calloc(1, sizeof *a)) == NULL) {
    e = cudaErrorMemoryAllocation;
  } else if ((e = map_import(&x, a)) != cudaSuccess) {
    free(a);
    a = NULL;
  } else {
    a->next = allocs;
    allocs = a;
  }
  if (a) *p = a->ptr + x.offset;
  pthread_mutex_unlock(&sim_lock);
  return sim_ret(e);
}

cudaError_t cudaIpcCloseMemHandle(void *p) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  pthread_mutex_lock(&sim_lock);
  sim_alloc *a = find_inside(p);
  int last = 0;
  if (a && a->kind == SIM_MEM_IMPORTED && --a->opens == 0) {
    unlink_alloc(a);
    last = 1;
  } else if (!a || a->kind != SIM_MEM_IMPORTED) {
    e = cudaErrorInvalidValue;
  }
  pthread_mutex_unlock(&sim_lock);
  if (!last) return sim_ret(e);
  note_importer(a->hdr, getpid(), 0);
  munmap(a->map, a->map_bytes);
  free(a);
  return cudaSuccess;
}

/* ---- objects of dead processes ---------------------------------------------------- */

/* A process killed while it held device memory cannot unlink its objects; a
 * GPU driver would free them.  Every process that starts the model removes
 * those whose owner no longer runs. */
void sim_memory_sweep(void) {
  DIR *dir = opendir("/dev/shm");
  if (dir == NULL) return;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    int pid = 0;
    unsigned long long seq = 0;
    if (sscanf(e->d_name, SHM_PREFIX "%d-%llu", &pid, &seq) != 2 || pid <= 0) continue;
    if (process_runs(pid)) continue;
    char name[300];
    snprintf(name, sizeof name, "/%s", e->d_name);
    shm_unlink(name);
  }
  closedir(dir);
}
