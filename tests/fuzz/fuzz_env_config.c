/* fuzz_env_config.c - the readers of KOLO_* values, on any string: the
 * first byte picks the kind, the rest is the value as getenv gives it.
 *   integers and sizes (common/config.c: decimal, 0x, octal, K/M/G) --
 *     a value read must read back the same when printed in decimal;
 *   KOLO_ALGO (ring/algo.c) -- auto, an algorithm whose name reads back
 *     as the value, or -2;
 *   KOLO_PROTO (core/proto_select.c) -- a record the wire check takes,
 *     whose text reads back as it, or a refusal with a sentence;
 *   KOLO_ROOT / KOLO_COMM_ID (core/rendezvous.c) -- host and port split
 *     within the buffer, the port a suffix of the value.
 * Booleans (KOLO_SHM_DISABLE...) are integers, read by the first. */
#include <inttypes.h>
#include <stdint.h>

#include "common/config.h"
#include "core/comm_state.h"
#include "core/proto_select.h"
#include "core/rendezvous.h"
#include "ring/algo.h"
#include "tests/fuzz/fuzz_util.h"

static void check_int(const char *v) {
  int64_t x = 0, again = 0;
  if (kolo_param_parse_int(v, &x) != 0) return;
  char text[32];
  snprintf(text, sizeof text, "%" PRId64, x);
  FUZZ_REQUIRE(kolo_param_parse_int(text, &again) == 0 && again == x);
}

static void check_algo(const char *v) {
  int a = kolo_algo_parse(v);
  FUZZ_REQUIRE(a == -2 || (a >= KOLO_ALGO_AUTO && a < KOLO_ALGO_NUM));
  if (a == KOLO_ALGO_AUTO) FUZZ_REQUIRE(*v == '\0');
  if (a >= 0) FUZZ_REQUIRE(strcmp(kolo_algo_name(a), v) == 0);
}

static void check_proto(const char *v) {
  char why[256] = "", text[160];
  int ll128 = 0, off = kolo_proto_off_parse(v, &ll128, why, sizeof why);
  FUZZ_REQUIRE(off >= KOLO_PROTO_NONE_LEFT && ll128 >= 0 && ll128 <= 1);
  if (off < 0) {
    FUZZ_REQUIRE(strncmp(why, "KOLO_PROTO", 10) == 0);
    return;
  }
  FUZZ_REQUIRE(kolo_proto_off_wrong((uint32_t)off) == NULL);
  if (off == 0) return;
  /* the text of a record (messages) reads back as that record */
  int again = kolo_proto_off_parse(kolo_proto_off_text((uint32_t)off, text, sizeof text), &ll128, why, sizeof why);
  FUZZ_REQUIRE(again == off);
}

static void check_host_port(const char *v) {
  char host[64];
  const char *port = NULL;
  if (kolo_rendezvous_split(v, host, sizeof host, &port) != koloSuccess) return;
  FUZZ_REQUIRE(memchr(host, '\0', sizeof host) != NULL);
  FUZZ_REQUIRE(port > v && port < v + strlen(v) && port[-1] == ':');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  char *v = fuzz_cstr(data + 1, size - 1);
  switch (data[0] % 4) {
  case 0: check_int(v); break;
  case 1: check_algo(v); break;
  case 2: check_proto(v); break;
  default: check_host_port(v); break;
  }
  free(v);
  return 0;
}
