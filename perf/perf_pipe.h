/* perf_pipe.h - whole messages on the pipes between kolo-perf's processes
 * (a rendezvous id to a forked rank, a probe's answer, a measurement's
 * times): exactly n bytes read or written, going on after EINTR. */
#ifndef KOLO_PERF_PIPE_H
#define KOLO_PERF_PIPE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

/* 0 once all n bytes are through; -1 on an error, or reading, on EOF first. */
static inline int perf_pipe_whole(int fd, char *p, size_t n, int writing) {
  while (n > 0) {
    ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static inline int perf_read_full(int fd, void *buf, size_t n) { return perf_pipe_whole(fd, buf, n, 0); }
/* write() does not touch the buffer: the cast drops a const it keeps. */
static inline int perf_write_full(int fd, const void *buf, size_t n) {
  return perf_pipe_whole(fd, (char *)(uintptr_t)buf, n, 1);
}

#endif
