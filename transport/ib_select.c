/* ib_select.c - the KOLO_IB_HCA list (see ib_select.h). */
#include "transport/ib_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One "name[:port]" entry of `len` bytes at s; 0 or -1 with why. */
static int parse_entry(const char *s, size_t len, kolo_ib_hca_entry *e, char *why, size_t why_len) {
  const char *colon = memchr(s, ':', len);
  size_t nlen = colon ? (size_t)(colon - s) : len;
  if (nlen == 0) {
    snprintf(why, why_len, "entry \"%.*s\" has no device name", (int)len, s);
    return -1;
  }
  if (nlen >= sizeof e->name) {
    snprintf(why, why_len, "device name \"%.*s\" is longer than %zu characters", (int)nlen, s,
             sizeof e->name - 1);
    return -1;
  }
  memcpy(e->name, s, nlen);
  e->name[nlen] = '\0';
  e->port = 0;
  if (colon == NULL) return 0;
  size_t plen = len - nlen - 1;
  long port = 0;
  for (size_t i = 0; i < plen && port <= 255; i++) {
    char c = colon[1 + i];
    port = c >= '0' && c <= '9' ? port * 10 + (c - '0') : 1000;
  }
  if (plen == 0 || port < 1 || port > 255) {
    snprintf(why, why_len, "entry \"%.*s\": the port must be a number from 1 to 255", (int)len, s);
    return -1;
  }
  e->port = (int)port;
  return 0;
}

int kolo_ib_hca_parse(const char *spec, kolo_ib_hca_list *out, char *why, size_t why_len) {
  memset(out, 0, sizeof *out);
  if (spec == NULL) return 0;
  if (*spec == '^') out->exclude = 1, spec++;
  if (*spec == '=') out->exact = 1, spec++;
  while (*spec != '\0') {
    const char *end = strchr(spec, ',');
    size_t len = end ? (size_t)(end - spec) : strlen(spec);
    if (len > 0) { /* "a,,b" and a trailing comma are forgiven, as NCCL does */
      if (out->n == KOLO_IB_HCA_MAX) {
        snprintf(why, why_len, "more than %d entries", KOLO_IB_HCA_MAX);
        return -1;
      }
      if (parse_entry(spec, len, &out->e[out->n], why, why_len) != 0) return -1;
      out->n++;
    }
    spec += len + (end ? 1 : 0);
  }
  if (out->n == 0 && (out->exclude || out->exact)) {
    snprintf(why, why_len, "\"^\" or \"=\" without any device name");
    return -1;
  }
  return 0;
}

static int entry_hits(const kolo_ib_hca_entry *e, int exact, const char *dev, int port) {
  int name = exact ? strcmp(dev, e->name) == 0 : strncmp(dev, e->name, strlen(e->name)) == 0;
  return name && (e->port == 0 || e->port == port);
}

int kolo_ib_hca_match(const kolo_ib_hca_list *l, const char *dev, int port) {
  if (l->n == 0) return 1;
  int hit = 0;
  for (int i = 0; i < l->n && !hit; i++) hit = entry_hits(&l->e[i], l->exact, dev, port);
  return l->exclude ? !hit : hit;
}
