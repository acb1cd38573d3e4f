/* swap.c - what a TCP connection per direction costs a 2-rank exchange of
 * small frames, against one connection both ways.
 *
 * Two processes on loopback swap 48-byte frames (kolo's header and an
 * 8-byte slice) ITERS times: each sends its frame, then spins on a
 * non-blocking recv until the other's came, as a 2-rank 8-byte all-reduce
 * does.  Mode 1: one TCP connection carries both directions (Open MPI's TCP
 * transport); mode 2: one connection per direction (kolo's socket
 * provider), so that no frame can carry the acknowledgement of the other;
 * mode 3: as 2, the receiving sockets told to delay their acknowledgements
 * (TCP_QUICKACK off, once), the state kolo's receive connections are in
 * since the credits they send back make the kernel see them as interactive.
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -o swap swap.c
 *   ./swap MODE ITERS        # prints microseconds per swap
 *
 * Across network namespaces (results/2026-11-30-tcp-duplex-veth/): with
 * DIAL=ADDR set the listener takes any address and the child dials ADDR,
 * after entering the namespace CHILD_NS (a /var/run/netns path) if set.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sched.h>

#define FRAME 48

static void die(const char *what) {
  perror(what);
  exit(1);
}

static int listener(int *port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(getenv("DIAL") ? INADDR_ANY : INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 4) ||
      getsockname(s, (struct sockaddr *)&a, &len))
    die("listener");
  *port = ntohs(a.sin_port);
  return s;
}

static int nodelay(int s) {
  int one = 1;
  if (s < 0 || setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)) die("socket");
  return s;
}

static int dial(int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = inet_addr(getenv("DIAL") ? getenv("DIAL") : "127.0.0.1")};
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a)) die("connect");
  return nodelay(s);
}

static void swap(int out, int in, long iters, int mode) {
  char b[FRAME] = {0};
  int zero = 0;
  if (mode == 3 && setsockopt(in, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof zero)) die("TCP_QUICKACK");
  for (long i = 0; i < iters; i++) {
    if (send(out, b, FRAME, 0) != FRAME) die("send");
    for (int got = 0; got < FRAME;) {
      ssize_t k = recv(in, b + got, FRAME - got, MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN)) die("recv");
      if (k > 0) got += (int)k;
    }
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s 1|2|3 ITERS\n", argv[0]);
    return 2;
  }
  int mode = atoi(argv[1]), p1, p2;
  long iters = atol(argv[2]);
  int l1 = listener(&p1), l2 = listener(&p2);
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) { /* sends on the first connection, receives on the second */
    const char *ns = getenv("CHILD_NS");
    int nsfd = ns ? open(ns, O_RDONLY) : -1;
    if (ns && (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0)) die("setns CHILD_NS");
    int a = dial(p1), b = mode >= 2 ? dial(p2) : a;
    swap(a, b, iters, mode);
    _exit(0);
  }
  int a = nodelay(accept(l1, NULL, NULL)), b = mode >= 2 ? nodelay(accept(l2, NULL, NULL)) : a;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  swap(b, a, iters, mode);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || status != 0) die("the other process");
  printf("mode %d: %.2f us per swap\n", mode, ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / iters);
  return 0;
}
