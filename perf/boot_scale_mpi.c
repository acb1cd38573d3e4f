/* boot_scale_mpi.c - kolo-boot-scale-mpi: kolo-boot-scale's twin over MPI,
 * for the figures beside kolo's.
 *
 *   mpirun -np N kolo-boot-scale-mpi
 *
 * Each rank runs MPI_Init and one checked 8-byte MPI_Allreduce (two
 * floats), measures its descriptors, resident memory and init time, and
 * rank 0 prints the same line as kolo-boot-scale ("links" and the root's
 * figures: -1, MPI's launcher has no such thing):
 *
 *   mpi N ranks wall_ms W fds M/X rss_mib M/X links -1/-1 init_ms M/X root_fds -1 root_bytes -1 failed F
 *
 * wall_ms is rank 0's time from MPI_Init's start to the gather.
 * `kolo-boot-scale-mpi BYTES` also runs one checked MPI_Alltoall of BYTES
 * per peer first, as kolo-boot-scale N BYTES does. */
#define _GNU_SOURCE
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf/perf_proc.h"

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The same checked all-to-all as kolo-boot-scale N BYTES runs. */
static int alltoall_checked(int rank, int n, size_t bytes) {
  size_t count = bytes / sizeof(int32_t), total = count * (size_t)n;
  int32_t *in = malloc(total * sizeof *in + 1), *out = malloc(total * sizeof *out + 1);
  int ok = in && out && count <= INT_MAX;
  if (ok) {
    perf_a2a_fill(in, rank, n, count);
    memset(out, 0xa5, total * sizeof *out);
    ok = MPI_Alltoall(in, (int)count, MPI_INT32_T, out, (int)count, MPI_INT32_T, MPI_COMM_WORLD) == MPI_SUCCESS &&
         perf_a2a_check(out, rank, n, count);
  }
  free(in);
  free(out);
  return ok;
}

int main(int argc, char **argv) {
  int64_t t0 = now_us();
  MPI_Init(&argc, &argv);
  int64_t init_us = now_us() - t0;
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  float v[2] = {(float)(rank + 1), 1.0f}, sum[2];
  int err = MPI_Allreduce(v, sum, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  int ok = err == MPI_SUCCESS && sum[0] == (float)n * (float)(n + 1) / 2 && sum[1] == (float)n;
  if (ok && argc == 2) ok = alltoall_checked(rank, n, (size_t)atoll(argv[1]));
  perf_rank_stat s = {rank, ok, perf_proc_fds(), -1, perf_proc_rss_kib(), init_us, -1};
  perf_rank_stat *all = rank == 0 ? calloc((size_t)n, sizeof *all) : NULL;
  MPI_Gather(&s, (int)sizeof s, MPI_BYTE, all, (int)sizeof s, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rank == 0 && all) {
    char line[256];
    int failed;
    perf_proc_summary(all, n, line, sizeof line, &failed);
    printf("mpi %d ranks wall_ms %lld %s root_fds -1 root_bytes -1 failed %d\n", n,
           (long long)((now_us() - t0) / 1000), line, failed);
  }
  free(all);
  MPI_Finalize();
  return s.ok ? 0 : 2;
}
