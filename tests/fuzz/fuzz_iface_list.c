/* fuzz_iface_list.c - KOLO_SOCKET_IFNAME's list (transport/iface_select.c)
 * on any string, matched against interface names: the input's own entries
 * (each must be selected by an inclusive list and left out by an
 * exclusive one) and a few usual names. */
#include <stdint.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"
#include "transport/iface_select.h"

static const char *const usual[] = {"lo", "eth0", "ib0", "docker0", "enp1s0f0", ""};

/* Every non-empty entry of the list after its "^" / "=" prefixes. */
static void check_entries(const char *spec) {
  int exclude = spec[0] == '^';
  const char *list = spec + exclude;
  list += list[0] == '=';
  char *copy = strdup(list);
  FUZZ_REQUIRE(copy != NULL);
  for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    FUZZ_REQUIRE(kolo_iface_match(spec, tok) == !exclude);
  free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *spec = fuzz_cstr(data, size);
  for (size_t i = 0; i < sizeof usual / sizeof usual[0]; i++) {
    int m = kolo_iface_match(spec, usual[i]);
    FUZZ_REQUIRE(m == 0 || m == 1);
  }
  check_entries(spec);
  free(spec);
  return 0;
}
