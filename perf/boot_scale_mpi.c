/* boot_scale_mpi.c - kolo-boot-scale-mpi [BYTES]: kolo-boot-scale's twin
 * over MPI, for the figures beside kolo's (`mpirun -np N kolo-boot-scale-mpi`).
 * Each rank runs MPI_Init and one checked 8-byte MPI_Allreduce (and with
 * BYTES one checked MPI_Alltoall of BYTES per peer), measures itself, and
 * rank 0 prints kolo-boot-scale's line, "links" and the root's figures -1
 * (MPI's launcher has no such thing), wall_ms from MPI_Init's start to the
 * gather. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "perf/perf_args.h"
#include "perf/perf_proc.h"

static int mpi_a2a(const int32_t *in, int32_t *out, size_t count, int rank, void *ctx) {
  (void)ctx;
  if (count <= INT_MAX)
    return MPI_Alltoall(in, (int)count, MPI_INT32_T, out, (int)count, MPI_INT32_T, MPI_COMM_WORLD) != MPI_SUCCESS;
  fprintf(stderr, "rank %d: %zu elements per peer: MPI_Alltoall takes at most INT_MAX\n", rank, count);
  return -1;
}

int main(int argc, char **argv) {
  int64_t t0 = perf_proc_now_us();
  MPI_Init(&argc, &argv);
  int64_t init_us = perf_proc_now_us() - t0;
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  float v[2] = {(float)(rank + 1), 1.0f}, sum[2];
  int err = MPI_Allreduce(v, sum, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  int ok = err == MPI_SUCCESS && sum[0] == (float)n * (float)(n + 1) / 2 && sum[1] == (float)n;
  size_t bytes = 0;
  if (argc > 2 || (argc == 2 && (perf_parse_size(argv[1], &bytes) != 0 || bytes % 4 != 0))) {
    if (rank == 0 && argc > 2) fprintf(stderr, "kolo-boot-scale-mpi: one argument at most\n");
    else if (rank == 0)
      fprintf(stderr, "kolo-boot-scale-mpi: BYTES '%s' is not a multiple of 4 (K, M, G: powers of 1024)\n", argv[1]);
    if (rank == 0) fprintf(stderr, "usage: mpirun -np N kolo-boot-scale-mpi [BYTES]\n");
    MPI_Finalize();
    return 2;
  }
  if (ok && bytes > 0) ok = perf_a2a_checked(rank, n, bytes, mpi_a2a, NULL);
  perf_rank_stat s = {rank, ok, perf_proc_fds(), -1, perf_proc_rss_kib(), init_us, -1};
  perf_rank_stat *all = rank == 0 ? calloc((size_t)n, sizeof *all) : NULL;
  MPI_Gather(&s, (int)sizeof s, MPI_BYTE, all, (int)sizeof s, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rank == 0 && all) {
    char line[256];
    int failed;
    perf_proc_summary(all, n, line, sizeof line, &failed);
    printf("mpi %d ranks wall_ms %lld %s root_fds -1 root_bytes -1 failed %d\n", n,
           (long long)((perf_proc_now_us() - t0) / 1000), line, failed);
  }
  free(all);
  MPI_Finalize();
  return s.ok ? 0 : 2;
}
