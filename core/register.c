/* register.c - koloCommRegister / koloCommDeregister and windows
 * (koloCommWindowRegister / koloCommWindowDeregister).
 *
 * A registration is a record of (communicator, buffer, size, flags); the
 * handle is that record.  kolo does not yet use registrations to save a
 * copy (README): it keeps them so that the API behaves as NCCL's, with
 * its errors.  One process-wide list holds every registration of every
 * communicator, so that a handle can be judged without touching it: one of
 * another communicator, one deregistered already (deregistered records stay
 * on the list, as tombstones, until their communicator is destroyed, at
 * most KEEP_DEAD per communicator), and a pointer that is no handle at all
 * get different sentences.  koloCommDestroy releases what is left. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm_state.h"
#include "core/register.h"
#include "core/mem.h"

/* Deregistered handles remembered per communicator, to tell a second
 * deregistration from a stray pointer. */
#define KEEP_DEAD 1024

typedef struct kolo_reg {
  struct kolo_reg *next;
  struct koloComm *comm;
  void *buff;
  size_t size;
  int window; /* 1: a window (koloCommWindowRegister) */
  int flags;
  int dead;   /* deregistered */
} kolo_reg;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static kolo_reg *regs; /* newest first */

static const char *api_name(int window, int reg) {
  if (window) return reg ? "koloCommWindowRegister" : "koloCommWindowDeregister";
  return reg ? "koloCommRegister" : "koloCommDeregister";
}

static koloResult_t check_register(struct koloComm *c, const void *buff, const void *out, const char *fn) {
  if (c == NULL) return kolo_error(NULL, koloInvalidArgument, "%s: comm is NULL", fn);
  if (out == NULL)
    return kolo_error(&c->err, koloInvalidArgument, "%s: %s is NULL", fn, strstr(fn, "Window") ? "win" : "handle");
  koloResult_t res = kolo_comm_check_ready(c, fn, 0);
  if (res != koloSuccess) return res;
  if (buff == NULL) return kolo_error(&c->err, koloInvalidArgument, "%s: rank %d: buff is NULL", fn, c->rank);
  return kolo_mem_check_kind(c, buff, fn);
}

static koloResult_t add_reg(struct koloComm *c, void *buff, size_t size, int window, int flags, kolo_reg **out) {
  kolo_reg *r = calloc(1, sizeof *r);
  if (r == NULL) return kolo_error(&c->err, koloSystemError, "%s: out of memory", api_name(window, 1));
  *r = (kolo_reg){NULL, c, buff, size, window, flags, 0};
  pthread_mutex_lock(&reg_lock);
  r->next = regs;
  regs = r;
  pthread_mutex_unlock(&reg_lock);
  *out = r;
  return koloSuccess;
}

koloResult_t koloCommRegister(const koloComm_t comm, void *buff, size_t size, void **handle) {
  koloResult_t res = check_register(comm, buff, handle, "koloCommRegister");
  kolo_reg *r = NULL;
  if (res == koloSuccess) res = add_reg(comm, buff, size, 0, 0, &r);
  if (res == koloSuccess) *handle = r;
  return res;
}

koloResult_t koloCommWindowRegister(koloComm_t comm, void *buff, size_t size, koloWindow_t *win, int winFlags) {
  const char *fn = "koloCommWindowRegister";
  koloResult_t res = check_register(comm, buff, win, fn);
  if (res != koloSuccess) return res;
  if (winFlags & ~(KOLO_WIN_DEFAULT | KOLO_WIN_COLL_SYMMETRIC))
    return kolo_error(&comm->err, koloInvalidArgument,
                      "%s: winFlags 0x%x: only KOLO_WIN_DEFAULT and KOLO_WIN_COLL_SYMMETRIC exist", fn, (unsigned)winFlags);
  if ((winFlags & KOLO_WIN_COLL_SYMMETRIC) && !kolo_mem_block_of(buff, size ? size : 1, NULL))
    return kolo_error(&comm->err, koloInvalidArgument,
                      "%s: rank %d: KOLO_WIN_COLL_SYMMETRIC needs memory from koloMemAlloc, and buff %p (%zu bytes) "
                      "is not inside one koloMemAlloc block", fn, comm->rank, buff, size);
  kolo_reg *r = NULL;
  res = add_reg(comm, buff, size, 1, winFlags, &r);
  if (res == koloSuccess) *win = (koloWindow_t)(void *)r;
  return res;
}

/* ---- deregistration ------------------------------------------------------ */

static kolo_reg *find_reg(const void *handle) {
  for (kolo_reg *r = regs; r; r = r->next)
    if (r == handle) return r;
  return NULL;
}

/* Frees the oldest tombstones of c beyond KEEP_DEAD (reg_lock held). */
static void trim_dead(struct koloComm *c) {
  int dead = 0;
  for (kolo_reg **pp = &regs; *pp;) {
    kolo_reg *r = *pp;
    if (r->comm == c && r->dead && ++dead > KEEP_DEAD) {
      *pp = r->next;
      free(r);
      continue;
    }
    pp = &r->next;
  }
}

/* Marks handle deregistered, or says why it cannot be (reg_lock held). */
static koloResult_t retire(struct koloComm *c, void *handle, int window) {
  const char *fn = api_name(window, 0);
  kolo_reg *r = find_reg(handle);
  if (r == NULL)
    return kolo_error(&c->err, koloInvalidArgument,
                      "%s: rank %d: handle %p is not a registration of any communicator (never returned by %s, or "
                      "its communicator was destroyed)", fn, c->rank, handle, api_name(window, 1));
  if (r->comm != c)
    return kolo_error(&c->err, koloInvalidArgument,
                      "%s: rank %d: handle %p belongs to another communicator (rank %d of %d), not to this one", fn,
                      c->rank, handle, r->comm->rank, r->comm->nranks);
  if (r->window != window)
    return kolo_error(&c->err, koloInvalidArgument, "%s: rank %d: handle %p comes from %s: release it with %s", fn,
                      c->rank, handle, api_name(r->window, 1), api_name(r->window, 0));
  if (r->dead)
    return kolo_error(&c->err, koloInvalidArgument, "%s: rank %d: handle %p (buff %p) was deregistered already", fn,
                      c->rank, handle, r->buff);
  r->dead = 1;
  trim_dead(c);
  return koloSuccess;
}

static koloResult_t deregister(struct koloComm *c, void *handle, int window) {
  const char *fn = api_name(window, 0);
  if (c == NULL) return kolo_error(NULL, koloInvalidArgument, "%s: comm is NULL", fn);
  if (handle == NULL) return kolo_error(&c->err, koloInvalidArgument, "%s: rank %d: the handle is NULL", fn, c->rank);
  koloResult_t res = kolo_comm_check_ready(c, fn, 1);
  if (res != koloSuccess) return res;
  pthread_mutex_lock(&reg_lock);
  res = retire(c, handle, window);
  pthread_mutex_unlock(&reg_lock);
  return res;
}

koloResult_t koloCommDeregister(const koloComm_t comm, void *handle) { return deregister(comm, handle, 0); }

koloResult_t koloCommWindowDeregister(koloComm_t comm, koloWindow_t win) {
  return deregister(comm, (void *)win, 1);
}

void kolo_reg_release_comm(struct koloComm *c) {
  pthread_mutex_lock(&reg_lock);
  for (kolo_reg **pp = &regs; *pp;) {
    kolo_reg *r = *pp;
    if (r->comm != c) {
      pp = &r->next;
      continue;
    }
    *pp = r->next;
    free(r);
  }
  pthread_mutex_unlock(&reg_lock);
}

int kolo_reg_count(const struct koloComm *c) {
  int n = 0;
  pthread_mutex_lock(&reg_lock);
  for (kolo_reg *r = regs; r; r = r->next) n += r->comm == c && !r->dead;
  pthread_mutex_unlock(&reg_lock);
  return n;
}
