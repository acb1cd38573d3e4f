/* fuzz_ib_hca.c - KOLO_IB_HCA's list parser (transport/ib_select.c) on any
 * string, as the environment gives it: "^=mlx5_0:1,mlx5_1".  A parsed list
 * must hold what it promises (at most KOLO_IB_HCA_MAX entries, names
 * non-empty and terminated, ports 0..255), and an inclusive list must
 * select each of its own entries; a rejected one must say why. */
#include <stdint.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"
#include "transport/ib_select.h"

static void check_list(const kolo_ib_hca_list *l) {
  FUZZ_REQUIRE(l->n >= 0 && l->n <= KOLO_IB_HCA_MAX);
  for (int i = 0; i < l->n; i++) {
    const kolo_ib_hca_entry *e = &l->e[i];
    size_t len = strnlen(e->name, sizeof e->name);
    FUZZ_REQUIRE(len > 0 && len < sizeof e->name);
    FUZZ_REQUIRE(e->port >= 0 && e->port <= 255);
    int port = e->port ? e->port : 1;
    FUZZ_REQUIRE(kolo_ib_hca_match(l, e->name, port) == !l->exclude);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *spec = fuzz_cstr(data, size);
  kolo_ib_hca_list l;
  char why[256] = "";
  if (kolo_ib_hca_parse(spec, &l, why, sizeof why) == 0) {
    check_list(&l);
    (void)kolo_ib_hca_match(&l, "mlx5_0", 1);
  } else {
    FUZZ_REQUIRE(why[0] != '\0' && strnlen(why, sizeof why) < sizeof why);
  }
  free(spec);
  return 0;
}
