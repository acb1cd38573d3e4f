/* cuda_peek.c - see cuda_peek.h. */
#include "util/cuda_peek.h"

#include "core/cuda_comm.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>

typedef struct {
  uint32_t value;
  cudaStream_t st;
  cudaError_t e;
} setter;

static void put(setter *s, uint32_t *word) {
  if (word != NULL && s->e == cudaSuccess)
    s->e = cudaMemcpyAsync(word, &s->value, sizeof s->value, cudaMemcpyHostToDevice, s->st);
}

/* An end's count; for a receive end also its pipe's head and tail (each
 * pipe has one receive end: every word is written once). */
static void set_end(setter *s, const kolo_dev_conn *d, int is_recv) {
  if (d->step == NULL) return;
  put(s, d->step);
  if (!is_recv) return;
  put(s, d->head);
  put(s, d->tail);
}

int kt_cuda_set_steps(koloComm_t comm, uint32_t step) {
  kolo_cuda_comm *cc = comm->cuda;
  if (cc == NULL) return -1;
  setter s = {step, (cudaStream_t)cc->setup_stream, cudaSetDevice(cc->dev)};
  for (int ch = 0; ch < comm->nchannels; ch++) {
    set_end(&s, &cc->ring_send[ch], 0);
    set_end(&s, &cc->ring_recv[ch], 1);
    for (int k = 0; k < 2; k++) {
      set_end(&s, &cc->hier_send[k][ch], 0);
      set_end(&s, &cc->hier_recv[k][ch], 1);
    }
  }
  for (size_t k = 0; k < (size_t)comm->nranks * (size_t)comm->nchannels; k++) {
    set_end(&s, &cc->p2p_send[k], 0);
    set_end(&s, &cc->p2p_recv[k], 1);
  }
  /* the copies read s.value when they run: wait before it goes */
  cudaError_t w = cudaStreamSynchronize(s.st);
  return (int)(s.e != cudaSuccess ? s.e : w);
}

#else

int kt_cuda_set_steps(koloComm_t comm, uint32_t step) {
  (void)comm;
  (void)step;
  return -1;
}

#endif
