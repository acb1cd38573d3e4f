/* iface_select.c - the KOLO_SOCKET_IFNAME list (see iface_select.h). */
#include "transport/iface_select.h"

#include <string.h>

/* Whether the entry of len bytes at entry names `name`. */
static int entry_hits(const char *entry, size_t len, int exact, const char *name) {
  if (exact) return strlen(name) == len && strncmp(name, entry, len) == 0;
  return strncmp(name, entry, len) == 0;
}

/* The list is walked in place: no copy, so no length limit (a copy into a
 * fixed buffer once cut long lists short, turning the last entry into a
 * shorter prefix). */
int kolo_iface_match(const char *spec, const char *name) {
  int exclude = spec[0] == '^';
  if (exclude) spec++;
  int exact = spec[0] == '=';
  if (exact) spec++;
  int hit = 0;
  while (*spec != '\0' && !hit) {
    size_t len = strcspn(spec, ",");
    if (len > 0) hit = entry_hits(spec, len, exact, name);
    spec += len + (spec[len] == ',' ? 1 : 0);
  }
  return exclude ? !hit : hit;
}
