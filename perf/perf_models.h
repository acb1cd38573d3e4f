/* perf_models.h - the parameter shapes of real models (perf/models/NAME.txt),
 * for `kolo-perf overlap`.
 *
 * A model file lists one tensor a line, "name dim0 [dim1 ...]", in forward
 * order; '#' starts a comment.  Two comment lines are directives the loader
 * checks, so that a typo in a shape fails loudly instead of skewing a figure:
 *   # tensors: N          the number of tensor lines
 *   # total_params: P     the sum over tensors of the product of their dims
 * Both are required.
 */
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
 * looked up as DIR/NAME.txt in `dir`.  Returns 0, or -1 with a message on
 * stderr naming the file and line.  perf_model_free undoes it. */
int perf_model_load(perf_model *m, const char *spec, const char *dir);
void perf_model_free(perf_model *m);

/* The directory of the model files: $KOLO_PERF_MODELS when set, else
 * PREFIX/share/kolo/models for a kolo-perf installed in PREFIX/bin, else
 * the one compiled in (perf/models of the source tree). */
const char *perf_models_dir(void);

/* PREFIX/share/kolo/NAME for a kolo-perf installed in PREFIX/bin
 * (cmake/kolo_package.cmake puts the model files and perf/plot.py there):
 * 1 when it exists, with its path in out; else 0. */
int perf_share_path(const char *name, char *out, size_t size);

#endif
