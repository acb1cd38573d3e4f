/* job_secret.h - the secret of a rendezvous every rank computes from its
 * environment (core/rendezvous.h): KOLO_SECRET (32 hex digits), else the
 * file KOLO_SECRET_FILE names (readable by its owner only), else one derived
 * from the launcher's job id, which anyone on the cluster can compute: a
 * warning says so on stderr, once per process, even without KOLO_DEBUG. */
#ifndef KOLO_CORE_JOB_SECRET_H
#define KOLO_CORE_JOB_SECRET_H

#include <stdint.h>

#include "transport/bootstrap.h"

/* Fills secret[KOLO_SECRET_BYTES].  `where` (the rendezvous address) and
 * `nranks` (0: unknown) enter the derived secret. */
koloResult_t kolo_job_secret(const char *where, int nranks, uint8_t *secret);

#endif
