/* apart.c - host and device apart: host threads cannot touch device memory.
 *
 * On a GPU a host thread that dereferences a cudaMalloc pointer faults (only
 * the runtime's copies, done by the GPU's copy engines, move device memory).
 * The model's device memory is host memory, so it tags every page of it
 * (cudaMalloc and cudaIpcOpenMemHandle mappings) with one x86 protection
 * key.  Access through that key is a right of each thread (its PKRU
 * register): Linux starts every thread of a program without it, a new thread
 * inherits its creator's, and the model's allocation takes it from the
 * thread that starts the model.  So every host thread is refused, and the
 * model grants it to
 *   - its block runners (the GPU's SMs), for good;
 *   - a copy or a set while it runs (the copy engines), on whichever thread
 *     runs it;
 *   - kolo_sim_dma_begin/end: host code that stands for a DMA engine.
 * A refused access is a SIGSEGV with SEGV_PKUERR: the handler names the
 * address, the allocation and the thread, then aborts.  Without protection
 * keys (pkey_alloc fails) the model says so once and runs unchecked;
 * KOLO_SIM_APART=0 turns the check off. */
#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <ucontext.h>
#include <unistd.h>

#include "cudasim/sim.h"

#ifndef SEGV_PKUERR
#define SEGV_PKUERR 4
#endif

static int apart_key = -1; /* -1: no check */
static struct sigaction previous_segv;

static void say(const char *s) {
  ssize_t r = write(STDERR_FILENO, s, strlen(s));
  (void)r;
}

/* Not a refused access: give the fault to whoever handled SIGSEGV before. */
static void pass_on(int sig, siginfo_t *si, void *uc) {
  if (previous_segv.sa_flags & SA_SIGINFO) {
    previous_segv.sa_sigaction(sig, si, uc);
    return;
  }
  if (previous_segv.sa_handler != SIG_DFL && previous_segv.sa_handler != SIG_IGN) {
    previous_segv.sa_handler(sig);
    return;
  }
  signal(SIGSEGV, SIG_DFL); /* the access faults again, now fatally */
}

/* The page fault's error code says whether the access was a write (x86). */
static const char *access_kind(const void *uc) {
#if defined(__x86_64__)
  return (((const ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) ? "wrote" : "read";
#else
  (void)uc;
  return "read or wrote";
#endif
}

static void on_segv(int sig, siginfo_t *si, void *uc) {
  if (si->si_code != SEGV_PKUERR || apart_key < 0) {
    pass_on(sig, si, uc);
    return;
  }
  char thread[17] = "?", where[256], msg[768];
  prctl(PR_GET_NAME, thread, 0, 0, 0);
  sim_mem_describe(si->si_addr, where, sizeof where);
  snprintf(msg, sizeof msg,
           "kolo cuda model: HOST ACCESS TO DEVICE MEMORY: thread %d (%s) of pid %d %s %p, %s, "
           "outside the runtime's copies; a GPU's host cannot dereference device memory (move it with "
           "cudaMemcpy*, or, for code that models a DMA engine, between kolo_sim_dma_begin and "
           "kolo_sim_dma_end).  KOLO_SIM_APART=0 turns this check off.  Where:\n",
           (int)gettid(), thread, (int)getpid(), access_kind(uc), si->si_addr, where);
  say(msg);
  void *frames[32];
  backtrace_symbols_fd(frames, backtrace(frames, 32), STDERR_FILENO);
  signal(SIGABRT, SIG_DFL);
  abort();
}

static void install_handler(void) {
  void *warm[1];
  (void)backtrace(warm, 1); /* loads the unwinder now, not in the handler */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &previous_segv);
}

/* At the model's start, on the thread that starts it (lock not held). */
void sim_apart_init(void) {
  const char *v = getenv("KOLO_SIM_APART");
  if (v != NULL && strcmp(v, "0") == 0) return;
  int key = pkey_alloc(0, PKEY_DISABLE_ACCESS);
  if (key < 0) {
    fprintf(stderr, "kolo cuda model: no memory protection keys here (pkey_alloc: %s): host access to "
                    "device memory is not checked\n", strerror(errno));
    return;
  }
  apart_key = key;
  install_handler();
}

/* Tags [p, p + bytes) (whole pages) as device memory. */
void sim_apart_tag(void *p, size_t bytes) {
  if (apart_key < 0 || bytes == 0) return;
  if (pkey_mprotect(p, bytes, PROT_READ | PROT_WRITE, apart_key) != 0)
    fprintf(stderr, "kolo cuda model: pkey_mprotect(%p, %zu): %s: that memory is not checked\n", p, bytes,
            strerror(errno));
}

/* Grants the calling thread access; returns what to restore. */
unsigned sim_apart_open(void) {
  if (apart_key < 0) return 0;
  unsigned was = (unsigned)pkey_get(apart_key);
  if (was != 0) pkey_set(apart_key, 0);
  return was;
}

void sim_apart_restore(unsigned was) {
  if (apart_key >= 0 && was != 0) pkey_set(apart_key, was);
}

unsigned kolo_sim_dma_begin(void) { return sim_apart_open(); }
void kolo_sim_dma_end(unsigned saved) { sim_apart_restore(saved); }
