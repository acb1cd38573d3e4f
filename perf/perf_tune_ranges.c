/* perf_tune_ranges.c - kolo-perf tune's search helpers: the sizes it
 * times, medians, and the size range each size stands for. */
#include <math.h>
#include <stdlib.h>

#include "perf/perf_tune_int.h"

void tune_plan_sizes(tune_job *j, size_t top, size_t factor, size_t budget, int lo, int hi) {
  j->nsizes = 0;
  for (size_t s = 8; s <= top && j->nsizes < TUNE_MAX_SIZES; s *= factor) {
    size_t n = budget / s;
    j->sizes[j->nsizes] = s;
    j->iters[j->nsizes++] = n < (size_t)lo ? lo : n > (size_t)hi ? hi : (int)n;
  }
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

double tune_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof v[0], cmp_double);
  return v[n / 2];
}

void tune_size_range(const tune_job *j, int i, uint64_t *lo, uint64_t *hi) {
  *lo = i == 0 ? 0 : (uint64_t)sqrt((double)j->sizes[i - 1] * (double)j->sizes[i]) + 1;
  *hi = i == j->nsizes - 1 ? (1ull << 62) - 1 : (uint64_t)sqrt((double)j->sizes[i] * (double)j->sizes[i + 1]);
}
