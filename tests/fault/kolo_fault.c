/* kolo_fault.c - kolo-fault: the fault matrix.  Each trial forks N ranks
 * (processes) that run checked collectives; a seeded RNG picks the victim,
 * the moment (init, first call, mid-collective, inside a group, destroy),
 * the fault (SIGKILL, SIGSTOP for good / resumed early / resumed late, its
 * sockets cut, its veth link down) and the transport's settings stay those
 * of the command line.  Every trial is judged by fault_trial.c; the summary
 * gives trials, faults per kind and moment, the longest time to error and
 * the leaks.  Exit status 1 on any violation.
 *
 *   kolo-fault [--trials N] [--seed S] [--tcp] [--netns PREFIX --ranks N] [--mem cuda]
 *              [--ib DEV:IF:ADDR,...]
 *              [--timeout-ms MS] [--bound-ms MS] [--kinds k,k] [-v]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fault_trial.h"
#include "fault_util.h"
#include "util/free_port.h"

typedef struct {
  int trials, tcp, ranks, timeout_ms, bound_ms, verbose, cuda;
  unsigned long long seed;
  const char *netns, *ib;
  int kind_on[FK_NUM];
  int at_on[AT_NUM];
} options;

static void usage(FILE *f) {
  fprintf(f, "usage: kolo-fault [--trials N] [--seed S] [--tcp] [--netns PREFIX --ranks N]\n"
             "                  [--timeout-ms MS] [--bound-ms MS] [--kinds LIST] [--mem host|cuda] [-v]\n"
             "  --tcp            ranks on this host use the net transport (TCP) instead of shm\n"
             "  --netns PREFIX   rank i runs in namespace PREFIXr<i> at 10.78.0.<i+1> on eth0\n"
             "                   (tests/fault/netns.sh makes them); implies --tcp\n"
             "  --ranks N        ranks per trial (default: 2..4 at random)\n"
             "  --kinds LIST     of kill,stop,stop+cont-early,stop+cont-late,cut,link-down\n"
             "  --at LIST        moments, of init,first_call,mid,group,destroy (default: all)\n"
             "                   (default: all but link-down; link-down needs --netns)\n"
             "  --mem cuda       CUDA communicators on device 0, device buffers, a stream per rank\n"
             "                   (a CUDA build, e.g. on the CPU model of the GPU: -DKOLO_CUDA=SIM)\n"
             "  --ib DEV:IF:ADDR[,DEV:IF:ADDR...]  KOLO_NET=ib: rank r is \"host\" r %% entries\n"
             "                   (KOLO_HOSTID) on that HCA and interface; the root at the first ADDR\n"
             "                   (tests/rdma/kolo_guest.sh: rxe0:veth0:10.77.0.1,rxe1:veth1:10.77.0.2)\n");
}

static int parse_kinds(options *o, const char *list) {
  memset(o->kind_on, 0, sizeof o->kind_on);
  char buf[256];
  snprintf(buf, sizeof buf, "%s", list);
  for (char *save = NULL, *k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int i = 0; i < FK_NUM; i++)
      if (strcmp(k, fault_kind_name((fault_kind)i)) == 0) found = o->kind_on[i] = 1;
    if (!found) return -1;
  }
  return 0;
}

static int parse_moments(options *o, const char *list) {
  memset(o->at_on, 0, sizeof o->at_on);
  char buf[256];
  snprintf(buf, sizeof buf, "%s", list);
  for (char *save = NULL, *a = strtok_r(buf, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int i = 0; i < AT_NUM; i++)
      if (strcmp(a, fault_at_name((fault_at)i)) == 0) found = o->at_on[i] = 1;
    if (!found) return -1;
  }
  return 0;
}

static int parse(options *o, int argc, char **argv) {
  *o = (options){30, 0, 0, 2000, 3000, 0, 0, 1, NULL, NULL, {1, 1, 1, 1, 1, 0}, {1, 1, 1, 1, 1}};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--tcp") == 0) o->tcp = 1;
    else if (strcmp(a, "-v") == 0) o->verbose = 1;
    else if (v && strcmp(a, "--trials") == 0) o->trials = atoi(argv[++i]);
    else if (v && strcmp(a, "--seed") == 0) o->seed = strtoull(argv[++i], NULL, 0);
    else if (v && strcmp(a, "--ranks") == 0) o->ranks = atoi(argv[++i]);
    else if (v && strcmp(a, "--timeout-ms") == 0) o->timeout_ms = atoi(argv[++i]);
    else if (v && strcmp(a, "--bound-ms") == 0) o->bound_ms = atoi(argv[++i]);
    else if (v && strcmp(a, "--netns") == 0) o->netns = argv[++i];
    else if (v && strcmp(a, "--ib") == 0) o->ib = argv[++i];
    else if (v && strcmp(a, "--at") == 0) {
      if (parse_moments(o, argv[++i]) != 0) return -1;
    }
    else if (v && strcmp(a, "--mem") == 0 && (strcmp(v, "cuda") == 0 || strcmp(v, "host") == 0))
      o->cuda = strcmp(argv[++i], "cuda") == 0;
    else if (v && strcmp(a, "--kinds") == 0) {
      if (parse_kinds(o, argv[++i]) != 0) return -1;
    } else return -1;
  }
  if (o->netns) o->tcp = 1;
  if (o->ib && (o->tcp || o->cuda)) return -1;
  if (o->ranks < 0 || o->ranks > 8 || o->trials < 1 || (o->netns && o->ranks < 2)) return -1;
  return o->kind_on[FK_LINK_DOWN] && !o->netns ? -1 : 0;
}

static fault_at random_moment(const options *o, uint64_t *st) {
  int on[AT_NUM], n = 0;
  for (int i = 0; i < AT_NUM; i++)
    if (o->at_on[i]) on[n++] = i;
  return (fault_at)on[fu_rand(st) % (uint64_t)n];
}

static fault_kind random_kind(const options *o, uint64_t *st) {
  int on[FK_NUM], n = 0;
  for (int i = 0; i < FK_NUM; i++)
    if (o->kind_on[i]) on[n++] = i;
  return (fault_kind)on[fu_rand(st) % (uint64_t)n];
}

/* The next trial: everything but the transport drawn from the RNG. */
static trial_spec random_trial(const options *o, uint64_t *st, int index) {
  trial_spec s;
  memset(&s, 0, sizeof s);
  s.nranks = o->ranks ? o->ranks : (int)fu_rand_in(st, 2, 4);
  s.victim = (int)(fu_rand(st) % (uint64_t)s.nranks);
  s.at = random_moment(o, st);
  s.kind = random_kind(o, st);
  /* init: while the ranks meet; mid: inside the 8 MiB all-reduce; destroy: inside teardown */
  s.delay_ms = s.at == AT_INIT ? (double)fu_rand_in(st, 0, 30) : s.at == AT_MID ? (double)fu_rand_in(st, 0, 8)
             : s.at == AT_DESTROY ? (double)fu_rand_in(st, 0, 3) : 0;
  s.seed = fu_rand(st);
  s.timeout_ms = o->timeout_ms;
  s.bound_ms = o->bound_ms;
  s.tcp = o->tcp;
  s.cuda = o->cuda;
  s.ib = o->ib;
  s.netns = o->netns;
  s.port = o->netns ? 29600 + index % 200 : kt_free_port();
  s.verbose = o->verbose;
  return s;
}

typedef struct {
  int trials, violated, per_kind[FK_NUM], per_at[AT_NUM], ok_ranks, err_ranks, named_victim;
  int leak_shm, leak_fd, leak_thread, leak_child, dev_abandoned;
  double max_tte_ms;
} summary;

static void add(summary *m, const trial_spec *s, const trial_result *r) {
  m->trials++;
  m->violated += r->violations > 0;
  m->per_kind[s->kind]++;
  m->per_at[s->at]++;
  m->ok_ranks += r->ok_ranks;
  m->err_ranks += r->err_ranks;
  m->named_victim += r->named_victim;
  m->leak_shm += r->leak_shm;
  m->leak_fd += r->leak_fd;
  m->leak_thread += r->leak_thread;
  m->leak_child += r->leak_child;
  m->dev_abandoned += r->dev_abandoned;
  if (r->max_tte_ms > m->max_tte_ms) m->max_tte_ms = r->max_tte_ms;
}

static void print_summary(const summary *m, const options *o) {
  printf("summary: %d trials (seed %llu, %s%s, timeout %d ms, bound +%d ms), %d violated\n", m->trials, o->seed,
         o->cuda ? "CUDA communicators, " : "",
         o->ib ? "ib between hosts" : o->netns ? "tcp across network namespaces" : o->tcp ? "tcp on loopback"
         : o->cuda ? "CUDA IPC" : "shm",
         o->timeout_ms, o->bound_ms,
         m->violated);
  printf("  faults:");
  for (int k = 0; k < FK_NUM; k++) printf(" %s %d", fault_kind_name((fault_kind)k), m->per_kind[k]);
  printf("\n  moments:");
  for (int a = 0; a < AT_NUM; a++) printf(" %s %d", fault_at_name((fault_at)a), m->per_at[a]);
  printf("\n  ranks: %d succeeded, %d failed with an error; max time from fault to a survivor's error %.0f ms\n",
         m->ok_ranks, m->err_ranks, m->max_tte_ms);
  printf("  leaks: %d shm segments, %d ranks with fds, %d with threads, %d child processes\n", m->leak_shm,
         m->leak_fd, m->leak_thread, m->leak_child);
  if (o->cuda)
    printf("  device memory kept by design for a stopped or cut-off peer that may map it (freed at exit): %d blocks\n",
           m->dev_abandoned);
}

int main(int argc, char **argv) {
  options o;
  if (parse(&o, argc, argv) != 0) {
    usage(stderr);
    return 2;
  }
  uint64_t st = o.seed;
  summary m;
  memset(&m, 0, sizeof m);
  for (int i = 0; i < o.trials; i++) {
    trial_spec s = random_trial(&o, &st, i);
    trial_result r = fault_trial_run(&s, i);
    add(&m, &s, &r);
  }
  print_summary(&m, &o);
  return m.violated ? 1 : 0;
}
