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
#include "core/mem.h"
#include "core/mem_kind.h"

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

/* Device memory, where the build has CUDA and the process sees a device:
 * the CUDA memory kind's (cuda_mem.c), or NULL (host memory). */
static const kolo_mem_kind *device_kind(int *device) {
  const kolo_mem_kind *k = kolo_mem_kind_find(koloMemCuda);
  *device = k ? k->alloc_device() : -1;
  return *device >= 0 ? k : NULL;
}

static koloResult_t alloc_on(const kolo_mem_kind *k, int device, size_t size, mem_block *b) {
  b->device = device;
  b->size = size;
  if (k != NULL) {
    void *p = NULL;
    koloResult_t res = k->alloc(device, size, &p);
    if (res == koloSuccess) b->ptr = p;
    return res;
  }
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
  int device = -1;
  const kolo_mem_kind *k = device_kind(&device);
  koloResult_t res = alloc_on(k, device, size, b);
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
  if (b->device >= 0) return kolo_mem_kind_find(koloMemCuda)->release(b->device, b->ptr);
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
  if (c->kind == NULL) { /* host memory */
    if (kolo_mem_block_of(buff, 1, &dev) && dev >= 0)
      return kolo_error(&c->err, koloInvalidArgument,
                        "%s: rank %d: buff %p is device memory (koloMemAlloc on CUDA device %d), and this is a host "
                        "communicator", fn, c->rank, buff, dev);
    return koloSuccess;
  }
  return c->kind->check_buffer(c, buff, fn);
}
