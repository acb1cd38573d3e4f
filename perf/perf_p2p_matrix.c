/* perf_p2p_matrix.c - the matrices of kolo-perf p2p, nvbandwidth's layout:
 * row the source, column the destination. */
#include <math.h>

#include "perf/perf_p2p.h"

void perf_p2p_matrix(FILE *out, const char *title, const char *name, const double *v, int n, const char *diag) {
  char label[32];
  fprintf(out, "# %s\n#%9s", title, "src\\dst");
  for (int j = 0; j < n; j++) {
    snprintf(label, sizeof label, "%s%d", name, j);
    fprintf(out, " %9s", label);
  }
  fprintf(out, "\n");
  for (int i = 0; i < n; i++) {
    snprintf(label, sizeof label, "%s%d", name, i);
    fprintf(out, " %9s", label);
    for (int j = 0; j < n; j++) {
      double x = v[i * n + j];
      if (i == j && diag) fprintf(out, " %9s", diag);
      else if (isnan(x)) fprintf(out, " %9s", "n/a");
      else fprintf(out, " %9.2f", x);
    }
    fprintf(out, "\n");
  }
  fflush(out);
}
