/* mem.c - koloMemAlloc / koloMemFree, and what registration asks about
 * memory.
 *
 * ncclMemAlloc gives device memory of the current device, allocated so
 * that it can be registered and shared.  kolo does the same where it can:
 * in a build with CUDA whose process sees a device.  Elsewhere (a build
 * without CUDA, or no device visible) there is no device memory to give,
 * so koloMemAlloc gives host memory: whole pages, zeroed, from mmap.
 * Every block is recorded, so that koloMemFree frees it the way it was
 * made, refuses what it did not give (or gave and took back), and
 * KOLO_WIN_COLL_SYMMETRIC windows can check that they lie in one block. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "core/comm_state.h"
#include "core/cuda_comm.h"
#include "core/mem.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

typedef struct mem_block {
  struct mem_block *next;
  char *ptr;
  size_t size;   /* asked for */
  size_t mapped; /* host: bytes mapped (whole pages) */
  int device;    /* CUDA device, or -1: host memory */
} mem_block;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_block *blocks;

/* The block holding [p, p + size), or NULL (call with mem_lock held). */
static mem_block *find_block(const void *p, size_t size) {
  const char *c = p;
  for (mem_block *b = blocks; b; b = b->next)
    if (c >= b->ptr && c < b->ptr + b->size) return (size_t)(b->ptr + b->size - c) >= size ? b : NULL;
  return NULL;
}

int kolo_mem_block_of(const void *p, size_t size, int *device) {
  pthread_mutex_lock(&mem_lock);
  mem_block *b = find_block(p, size);
  if (b && device) *device = b->device;
  pthread_mutex_unlock(&mem_lock);
  return b != NULL;
}

/* The device koloMemAlloc allocates on: the current one, or -1 (host). */
static int alloc_device(void) {
#ifdef KOLO_HAVE_CUDA
  int count = 0, dev = -1;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 || cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError(); /* our probe is not the caller's error */
    return -1;
  }
  return dev;
#else
  return -1;
#endif
}

static koloResult_t alloc_on(int device, size_t size, mem_block *b) {
  b->device = device;
  b->size = size;
#ifdef KOLO_HAVE_CUDA
  if (device >= 0) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, size);
    if (e != cudaSuccess)
      return kolo_error(NULL, koloUnhandledCudaError, "koloMemAlloc: cudaMalloc of %zu bytes on CUDA device %d failed: %s",
                        size, device, cudaGetErrorString(e));
    b->ptr = p;
    return koloSuccess;
  }
#endif
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  b->mapped = (size + page - 1) / page * page;
  void *p = mmap(NULL, b->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return kolo_syserror(NULL, errno, "koloMemAlloc: mmap of %zu bytes of host memory failed", size);
  b->ptr = p;
  return koloSuccess;
}

koloResult_t koloMemAlloc(void **ptr, size_t size) {
  if (ptr == NULL) return kolo_error(NULL, koloInvalidArgument, "koloMemAlloc: ptr is NULL");
  if (size == 0) return kolo_error(NULL, koloInvalidArgument, "koloMemAlloc: size is 0");
  mem_block *b = calloc(1, sizeof *b);
  if (b == NULL) return kolo_error(NULL, koloSystemError, "koloMemAlloc: out of memory");
  koloResult_t res = alloc_on(alloc_device(), size, b);
  if (res != koloSuccess) {
    free(b);
    return res;
  }
  pthread_mutex_lock(&mem_lock);
  b->next = blocks;
  blocks = b;
  pthread_mutex_unlock(&mem_lock);
  *ptr = b->ptr;
  return koloSuccess;
}

/* Unlinks the block that starts at p (mem_lock held); NULL when none. */
static mem_block *take_block(void *p) {
  for (mem_block **pp = &blocks; *pp; pp = &(*pp)->next)
    if ((*pp)->ptr == p) {
      mem_block *b = *pp;
      *pp = b->next;
      return b;
    }
  return NULL;
}

static koloResult_t release(mem_block *b) {
#ifdef KOLO_HAVE_CUDA
  if (b->device >= 0) {
    int cur = -1; /* cudaFree in the block's device, then the caller's device again */
    cudaError_t e = cudaGetDevice(&cur);
    if (e == cudaSuccess) e = cudaSetDevice(b->device);
    if (e == cudaSuccess) e = cudaFree(b->ptr);
    if (cur >= 0 && cudaSetDevice(cur) != cudaSuccess)
      KOLO_WARN("koloMemFree: cannot make CUDA device %d current again", cur);
    if (e != cudaSuccess)
      return kolo_error(NULL, koloUnhandledCudaError, "koloMemFree: cudaFree of %p (CUDA device %d) failed: %s",
                        (void *)b->ptr, b->device, cudaGetErrorString(e));
    return koloSuccess;
  }
#endif
  if (munmap(b->ptr, b->mapped) != 0) return kolo_syserror(NULL, errno, "koloMemFree: munmap of %p failed", (void *)b->ptr);
  return koloSuccess;
}

koloResult_t koloMemFree(void *ptr) {
  if (ptr == NULL) return koloSuccess;
  pthread_mutex_lock(&mem_lock);
  mem_block *b = take_block(ptr);
  mem_block *inside = b ? NULL : find_block(ptr, 1);
  char *start = inside ? inside->ptr : NULL;
  pthread_mutex_unlock(&mem_lock);
  if (start)
    return kolo_error(NULL, koloInvalidArgument, "koloMemFree: ptr %p is inside the koloMemAlloc block at %p, not its start",
                      ptr, (void *)start);
  if (b == NULL)
    return kolo_error(NULL, koloInvalidArgument,
                      "koloMemFree: ptr %p was not returned by koloMemAlloc, or was freed already", ptr);
  koloResult_t res = release(b);
  free(b);
  return res;
}

/* What a communicator may register: memory of its own kind (and device). */
koloResult_t kolo_mem_check_kind(struct koloComm *c, const void *buff, const char *fn) {
  int dev = -1;
  if (c->memory == koloMemHost) {
    if (kolo_mem_block_of(buff, 1, &dev) && dev >= 0)
      return kolo_error(&c->err, koloInvalidArgument,
                        "%s: rank %d: buff %p is device memory (koloMemAlloc on CUDA device %d), and this is a host "
                        "communicator", fn, c->rank, buff, dev);
    return koloSuccess;
  }
#ifdef KOLO_HAVE_CUDA
  struct cudaPointerAttributes a;
  cudaError_t e = cudaPointerGetAttributes(&a, buff);
  if (e != cudaSuccess) (void)cudaGetLastError();
  int is_dev = e == cudaSuccess && (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged);
  if (!is_dev)
    return kolo_error(&c->err, koloInvalidArgument,
                      "%s: rank %d: buff %p is not device memory, and this is a CUDA communicator (device %d)", fn,
                      c->rank, buff, c->cuda ? c->cuda->dev : c->cuda_dev);
  if (c->cuda && a.device != c->cuda->dev)
    return kolo_error(&c->err, koloInvalidArgument,
                      "%s: rank %d: buff %p is memory of CUDA device %d, not of the communicator's device %d", fn,
                      c->rank, buff, a.device, c->cuda->dev);
#endif
  return koloSuccess;
}
