/* perf_models.h - the parameter shapes of real models (perf/models/NAME.txt),
 * for `kolo-perf overlap`; the file format: docs/benchmarking.md. */
#ifndef KOLO_PERF_MODELS_H
#define KOLO_PERF_MODELS_H

#include <stddef.h>

typedef struct {
  char name[64];  /* the file's base name without ".txt" */
  char path[512]; /* where it was read from */
  size_t *count;  /* each tensor's elements (the product of its dims), forward order */
  int ntensors;
  size_t total; /* elements over all tensors, as checked against the file */
} perf_model;

/* Reads `spec`: a path (it contains '/' or ends in ".txt"), or a model name
 * looked up as DIR/NAME.txt in `dir`.  0, or -1 said.  perf_model_free undoes it. */
int perf_model_load(perf_model *m, const char *spec, const char *dir);
void perf_model_free(perf_model *m);

/* $KOLO_PERF_MODELS when set, else the installed share/kolo/models, else perf/models. */
const char *perf_models_dir(void);

/* PREFIX/share/kolo/NAME for a kolo-perf installed in PREFIX/bin
 * (cmake/kolo_package.cmake puts the model files and perf/plot.py there):
 * 1 when it exists, with its path in out; else 0. */
int perf_share_path(const char *name, char *out, size_t size);

#endif
