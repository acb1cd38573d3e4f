/* free_port.c - see free_port.h. */
#define _GNU_SOURCE
#include "free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KT_PORT_FLOOR 10000

/* The first port of the kernel's ephemeral range (32768 when unreadable). */
static int ephemeral_low(void) {
  int low = 32768, high = 0;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f == NULL) return low;
  if (fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
  fclose(f);
  return low;
}

/* 1 when a fresh socket can bind 127.0.0.1:port right now. */
static int port_is_free(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
  close(fd);
  return ok;
}

int kt_free_port(void) {
  int top = ephemeral_low() - 1;
  if (top <= KT_PORT_FLOOR) top = KT_PORT_FLOOR + 1000;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)now.tv_nsec;
  for (int draw = 0; draw < 200; draw++) {
    int port = KT_PORT_FLOOR + (int)(rand_r(&seed) % (unsigned)(top - KT_PORT_FLOOR));
    if (port_is_free(port)) return port;
  }
  return -1;
}
