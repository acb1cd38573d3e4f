/* job_secret.c - where a rendezvous's secret comes from (job_secret.h).
 * The secret itself is never logged: messages name its source only. */
#include "core/job_secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* `len` characters of hex (a file's trailing newline already cut). */
static koloResult_t secret_from_hex(const char *what, const char *hex, size_t len, uint8_t *secret) {
  if (len != 2 * KOLO_SECRET_BYTES)
    return kolo_error(NULL, koloInvalidArgument, "%s must hold %d hex digits, not %zu characters", what,
                      2 * KOLO_SECRET_BYTES, len);
  for (int i = 0; i < KOLO_SECRET_BYTES; i++) {
    int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return kolo_error(NULL, koloInvalidArgument, "%s is not hex", what);
    secret[i] = (uint8_t)(hi * 16 + lo);
  }
  return koloSuccess;
}

/* Refuses a file that another user may read: the secret would not be one. */
static koloResult_t check_private(const char *path, int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return kolo_syserror(NULL, errno, "KOLO_SECRET_FILE %s: fstat failed", path);
  if (!S_ISREG(st.st_mode))
    return kolo_error(NULL, koloInvalidArgument, "KOLO_SECRET_FILE %s is not a regular file", path);
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    return kolo_error(NULL, koloInvalidArgument,
                      "KOLO_SECRET_FILE %s has mode %04o: other users may read it (chmod 600 %s)", path,
                      (unsigned)(st.st_mode & 07777), path);
  return koloSuccess;
}

static koloResult_t secret_from_file(const char *path, uint8_t *secret) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return kolo_syserror(NULL, errno, "KOLO_SECRET_FILE %s cannot be opened", path);
  char buf[4 * KOLO_SECRET_BYTES];
  koloResult_t res = check_private(path, fd);
  ssize_t n = res == koloSuccess ? read(fd, buf, sizeof buf) : 0;
  if (res == koloSuccess && n < 0) res = kolo_syserror(NULL, errno, "KOLO_SECRET_FILE %s: read failed", path);
  close(fd);
  while (res == koloSuccess && n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
  if (res == koloSuccess) res = secret_from_hex("KOLO_SECRET_FILE's content", buf, (size_t)n, secret);
  memset(buf, 0, sizeof buf);
  return res;
}

static void warn_derived_once(void) {
  static atomic_flag warned = ATOMIC_FLAG_INIT;
  if (atomic_flag_test_and_set(&warned)) return;
  KOLO_NOTICE("neither KOLO_SECRET nor KOLO_SECRET_FILE is set: the bootstrap secret is derived from the "
              "launcher's job id, which anyone on the cluster can compute; set one of them (README: "
              "Security and launchers)");
}

/* Every rank can compute it, but so can anyone who knows the job. */
static void secret_from_job(const char *where, int nranks, uint8_t *secret) {
  static const char *ids[] = {"MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID", "OMPI_MCA_orte_ess_jobid",
                              "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID"};
  uint64_t h1 = 1469598103934665603ull, h2 = 0x9e3779b97f4a7c15ull ^ (uint64_t)nranks;
  for (size_t i = 0; i <= sizeof ids / sizeof ids[0]; i++) {
    const char *v = i == 0 ? where : getenv(ids[i - 1]);
    for (const char *p = v ? v : ""; *p; p++) {
      h1 = (h1 ^ (uint8_t)*p) * 1099511628211ull;
      h2 = (h2 ^ h1) * 0xff51afd7ed558ccdull;
    }
  }
  memcpy(secret, &h1, 8);
  memcpy(secret + 8, &h2, 8);
  warn_derived_once();
}

koloResult_t kolo_job_secret(const char *where, int nranks, uint8_t *secret) {
  const char *hex = kolo_param_str("KOLO_SECRET"), *file = kolo_param_str("KOLO_SECRET_FILE");
  if (hex != NULL && file != NULL)
    return kolo_error(NULL, koloInvalidArgument, "KOLO_SECRET and KOLO_SECRET_FILE are both set: set one");
  if (hex != NULL) return secret_from_hex("KOLO_SECRET", hex, strlen(hex), secret);
  if (file != NULL) return secret_from_file(file, secret);
  secret_from_job(where, nranks, secret);
  return koloSuccess;
}
