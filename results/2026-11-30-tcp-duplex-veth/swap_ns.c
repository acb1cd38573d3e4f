/* swap_ns.c - results/2026-11-29-tcp-duplex/swap.c across a veth pair:
 * the listener takes any address, the dialing child enters the network
 * namespace CHILD_NS (a /var/run/netns path) and dials DIAL (default
 * 127.0.0.1).  Modes as there: 1 one connection both ways; 3 one per
 * direction, acknowledgements delayed (kolo's state).
 *
 *   CHILD_NS=/var/run/netns/B DIAL=ADDR ./swap_ns MODE ITERS   # in namespace A
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
#include <sched.h>
#include <fcntl.h>

#define FRAME 48

static void die(const char *what) {
  perror(what);
  exit(1);
}

static int listener(int *port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
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
    if (getenv("CHILD_NS")) { int fd = open(getenv("CHILD_NS"), O_RDONLY); if (fd < 0 || setns(fd, CLONE_NEWNET)) die("setns"); }
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
