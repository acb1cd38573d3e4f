/* transport_shm.c - pipes between processes of one host: POSIX shm.
 *
 * The receiver creates /dev/shm/kolo-<job>-<pid>-<from>-<to>-<tag>, maps it and sends the
 * name; the sender maps it, unlinks the name and acknowledges; the receiver
 * unlinks it too (whichever comes second finds it gone), so the segment
 * vanishes with the last mapping even if both processes are killed, and a
 * receiver stopped or killed before the acknowledgement leaves no name
 * behind once its sender has mapped the segment.  One killed or stopped
 * before its sender mapped it leaves a name only that sender can spell:
 * the sender removes it when its setup fails (send_abandon).  Should the
 * sender be gone too, each process sweeps such names once, before its
 * first segment (kolo_shm_sweep_stale). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/shm_sweep.h"
#include "transport/transport.h"

/* A name in /dev/shm is stale when it is one of kolo's segment names, its
 * creator (the pid in it) is no process here, it is this user's, and it
 * was last written more than older_than_s ago: a younger one may be the
 * segment of a process in another pid namespace, still being connected. */
static int stale_name(int dir, const char *name, time_t now, int64_t older_than_s) {
  unsigned long long job;
  unsigned tag;
  int pid, from, to, end = 0;
  if (sscanf(name, "kolo-%16llx-%d-%d-%d-%x%n", &job, &pid, &from, &to, &tag, &end) != 5 || name[end] != '\0')
    return 0;
  if (pid <= 0 || pid == (int)getpid() || kill(pid, 0) == 0 || errno != ESRCH) return 0;
  struct stat st;
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) return 0;
  return (int64_t)(now - st.st_mtime) > older_than_s;
}

int kolo_shm_sweep_stale(const char *dir, int64_t older_than_s) {
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  int removed = 0;
  time_t now = time(NULL);
  for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
    if (stale_name(dirfd(d), e->d_name, now, older_than_s) && unlinkat(dirfd(d), e->d_name, 0) == 0) removed++;
  closedir(d);
  return removed;
}

/* Longer than any connection's setup takes (the segment's name lives from
 * the receiver's shm_open until its sender maps it). */
#define SHM_STALE_S 600

static void sweep_once(void) {
  int n = kolo_shm_sweep_stale("/dev/shm", SHM_STALE_S);
  if (n > 0) KOLO_INFO("removed %d /dev/shm/kolo-* name(s) left by processes that died while connecting", n);
}

_Static_assert(sizeof(((kolo_connector *)0)->name) == KOLO_SHM_NAME_BYTES, "shm names fit the wire");

static int shm_can_connect(const kolo_conn_setup *s) {
  return s->self->host_hash == s->peer->host_hash && kolo_param_int("KOLO_SHM_DISABLE") == 0;
}

static koloResult_t shm_map(const kolo_conn_setup *s, kolo_connector *c, int fd, size_t bytes) {
  void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED)
    return kolo_syserror(s->eb, errno, "mmap of %zu bytes of shm segment %s for rank %d failed",
                         bytes, c->name, s->peer->rank);
  c->mem = mem;
  c->mem_bytes = bytes;
  c->ctrl = mem;
  c->slots = (char *)mem + KOLO_CONN_CTRL_BYTES;
  c->sig_box = 1; /* both ends map this control block */
  return koloSuccess;
}

/* /kolo-<job>-<creator pid>-<from>-<to>-<tag>: the receiver creates it;
 * both ends can spell it. */
static void segment_name(char *out, size_t len, uint64_t job, int creator, int from, int to,
                         uint32_t tag) {
  snprintf(out, len, "/kolo-%016llx-%d-%d-%d-%x", (unsigned long long)job, creator, from, to, tag);
}

static koloResult_t shm_recv_create(const kolo_conn_setup *s, kolo_connector *c, char *desc) {
  static pthread_once_t swept = PTHREAD_ONCE_INIT;
  pthread_once(&swept, sweep_once);
  size_t bytes = KOLO_CONN_CTRL_BYTES + s->slot_bytes * s->nslots;
  segment_name(c->name, sizeof c->name, s->job, (int)getpid(), s->peer->rank, s->self->rank, s->tag);
  int fd = shm_open(c->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return kolo_syserror(s->eb, errno, "shm_open(%s) failed", c->name);
  koloResult_t res = koloSuccess;
  if (ftruncate(fd, (off_t)bytes) != 0) {
    res = kolo_syserror(s->eb, errno, "cannot size shm segment %s to %zu bytes (is /dev/shm full?)",
                        c->name, bytes);
    goto unlink_name;
  }
  res = shm_map(s, c, fd, bytes);
  if (res != koloSuccess) goto unlink_name;
  close(fd);
  kolo_encode_shm_desc(c->name, (uint8_t *)desc);
  return koloSuccess;
unlink_name:
  shm_unlink(c->name);
  c->name[0] = '\0';
  close(fd);
  return res;
}

static koloResult_t shm_send_attach(const kolo_conn_setup *s, kolo_connector *c,
                                    const char *desc) {
  char why[KOLO_ERR_LEN];
  if (kolo_decode_shm_desc(desc, KOLO_CONN_DESC_BYTES, s->peer->rank, c->name, why, sizeof why) != KOLO_CONN_WIRE_OK)
    return kolo_error(s->eb, koloRemoteError, "%s", why);
  int fd = shm_open(c->name, O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return kolo_syserror(s->eb, errno, "cannot open shm segment %s of rank %d", c->name,
                                   s->peer->rank);
  koloResult_t res = shm_map(s, c, fd, KOLO_CONN_CTRL_BYTES + s->slot_bytes * s->nslots);
  close(fd);
  if (res == koloSuccess) shm_unlink(c->name); /* both have it mapped: the name serves no one */
  c->name[0] = '\0';
  return res;
}

static void shm_recv_attached(kolo_connector *c) {
  if (c->name[0] != '\0') shm_unlink(c->name);
  c->name[0] = '\0';
}

/* The receiver made the name (or never will, or has unlinked it: ENOENT);
 * nobody but this sender would map it, and this sender has given up. */
static void shm_send_abandon(const kolo_conn_setup *s) {
  char name[sizeof ((kolo_connector *)0)->name];
  segment_name(name, sizeof name, s->job, s->peer->pid, s->self->rank, s->peer->rank, s->tag);
  if (shm_unlink(name) != 0 && errno != ENOENT) KOLO_WARN("shm_unlink(%s): %s", name, strerror(errno));
}

static void shm_close(kolo_connector *c) {
  shm_recv_attached(c);
  if (c->mem != NULL) munmap(c->mem, c->mem_bytes);
  c->mem = NULL;
  c->ctrl = NULL;
}

const kolo_transport kolo_transport_shm = {
    .name = "shm",
    .can_connect = shm_can_connect,
    .recv_create = shm_recv_create,
    .send_attach = shm_send_attach,
    .recv_attached = shm_recv_attached,
    .close = shm_close,
    .send_abandon = shm_send_abandon,
};
