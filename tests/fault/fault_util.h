/* fault_util.h - what the fault and soak programs share besides collectives:
 * clocks, a seeded RNG, counts of this process's fds / threads / resident
 * pages, line output on a pipe, cutting a process's sockets, and the
 * /dev/shm segments kolo made for a set of processes (its names carry the
 * creator's pid: transport/transport_shm.c). */
#ifndef KOLO_FAULT_UTIL_H
#define KOLO_FAULT_UTIL_H

#include <stdint.h>
#include <sys/types.h>

int64_t fu_now_ns(void);
void fu_sleep_ms(double ms);

/* splitmix64: small, seedable, the same stream on every rank. */
uint64_t fu_rand(uint64_t *state);
/* Uniform in [lo, hi]. */
uint64_t fu_rand_in(uint64_t *state, uint64_t lo, uint64_t hi);

/* Entries of /proc/self/fd and /proc/self/task; -1 if unreadable. */
int fu_count_fds(void);
int fu_count_threads(void);
/* Resident set in KiB from /proc/self/statm; -1 if unreadable. */
long fu_rss_kib(void);

/* shutdown(SHUT_RDWR) of every socket of this process; returns how many. */
int fu_cut_sockets(void);

/* /dev/shm/kolo-* segments whose creator pid is one of pids[0..n);
 * per_rank[i] (when not NULL) gets those of pids[i]. */
int fu_shm_segments_of(const pid_t *pids, int n, int *per_rank);

/* Writes the whole line (printf-style) to fd; retries short writes. */
void fu_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
