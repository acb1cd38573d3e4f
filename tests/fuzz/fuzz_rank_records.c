/* fuzz_rank_records.c - what a rank decodes of the records other ranks send
 * it at init, split, shrink and in a fusion, and of a koloUniqueId: the
 * decoders of transport/uid_codec.c, core/comm_wire.h and
 * fusion/negotiate_wire.h, from any input.  Byte 0 picks the decoder, byte
 * 1 its parameter (the communicator's ranks, or a list's length); the rest
 * is the record.  Whatever a decoder accepts must be in range, and must be
 * exactly what its encoder writes for the decoded value (no byte ignored,
 * nothing misread); whatever it refuses must come with a terminated
 * sentence naming the sender. */
#include <stdint.h>
#include <string.h>

#include "core/comm_wire.h"
#include "fusion/negotiate_wire.h"
#include "transport/bootstrap_wire.h"
#include "tests/fuzz/fuzz_util.h"

#define PEER 3
#define MAX_LIST 64

/* The decoder's verdict: accepted records re-encode to their input;
 * refusals say why, naming the sender (who: its name in the sentence). */
static void check(int v, const uint8_t *in, size_t len, const uint8_t *again, size_t again_len, const char *why,
                  const char *who) {
  if (v != 0) {
    FUZZ_REQUIRE(memchr(why, '\0', 512) != NULL && strstr(why, who) != NULL);
    return;
  }
  FUZZ_REQUIRE(again_len == len && memcmp(again, in, len) == 0);
}

static void unique_id(const uint8_t *in, size_t len, char *why) {
  kolo_uid u;
  koloUniqueId id;
  memset(&id, 0, sizeof id);
  int v = kolo_decode_unique_id(in, len, "rank 3's unique id", &u, why, 512);
  if (v == KOLO_WIRE_OK) {
    FUZZ_REQUIRE(u.magic == KOLO_UID_MAGIC || u.magic == KOLO_UID_MAGIC_ROOT_AT_INIT);
    FUZZ_REQUIRE((u.root.ss_family == AF_INET || u.root.ss_family == AF_INET6) && kolo_addr_port(&u.root) != 0);
    kolo_uid_encode(&u, &id);
  }
  check(v, in, len, (const uint8_t *)id.internal, sizeof id.internal, why, "rank 3's unique id");
}

static void comm_records(int which, int param, const uint8_t *in, size_t len, char *why) {
  uint8_t again[KOLO_SHRINK_MSG_BYTES];
  size_t n = 0;
  int v;
  if (which == 1) {
    kolo_comm_shape s;
    v = kolo_decode_comm_shape(in, len, PEER, &s, why, 512);
    if (v == 0) FUZZ_REQUIRE(s.nchannels >= 1 && s.nslots >= 2 && s.slot_bytes >= 4096);
    if (v == 0) {
      kolo_encode_comm_shape(&s, again);
      n = KOLO_COMM_SHAPE_BYTES;
    }
  } else if (which == 2) {
    kolo_split_entry e;
    v = kolo_decode_split_entry(in, len, PEER, &e, why, 512);
    if (v == 0) FUZZ_REQUIRE(e.rank == PEER && e.color >= KOLO_SPLIT_NOCOLOR);
    if (v == 0) {
      kolo_encode_split_entry(&e, again);
      n = KOLO_SPLIT_ENTRY_BYTES;
    }
  } else if (which == 3) {
    kolo_shrink_msg m;
    v = kolo_decode_shrink_msg(in, len, PEER, param, &m, why, 512);
    if (v == 0) FUZZ_REQUIRE(m.nsurvivors >= 1 && m.nsurvivors <= param);
    if (v == 0) {
      kolo_encode_shrink_msg(&m, again);
      n = KOLO_SHRINK_MSG_BYTES;
    }
  } else if (which == 4) {
    kolo_device_choice d;
    v = kolo_decode_device_choice(in, len, PEER, &d, why, 512);
    if (v == 0) FUZZ_REQUIRE(d.err != 0 || (d.dev >= 0 && d.dev < d.count));
    if (v == 0) {
      kolo_encode_device_choice(&d, again);
      n = KOLO_DEVICE_CHOICE_BYTES;
    }
  } else {
    kolo_device_room f;
    v = kolo_decode_device_room(in, len, PEER, param, &f, why, 512);
    if (v == 0) FUZZ_REQUIRE(f.sharing >= 1 && f.sharing <= param && f.per_sm >= 0 && f.sms >= 0);
    if (v == 0) {
      kolo_encode_device_room(&f, again);
      n = KOLO_DEVICE_ROOM_BYTES;
    }
  }
  check(v, in, len, again, n, why, "rank 3 sent");
}

static void fusion_record(int which, const uint8_t *in, size_t len, char *why) {
  uint8_t again[KF_SUMMARY_WIRE_BYTES];
  size_t n = 0;
  int v;
  if (which == 6) {
    kf_view w;
    v = kf_decode_view(in, len, PEER, &w, why, 512);
    if (v == 0) FUZZ_REQUIRE(w.rank == PEER && w.nmarked >= 0 && w.nmarked <= (int64_t)w.sig.ntensors);
    if (v == 0) {
      kf_encode_view(&w, again);
      n = KF_VIEW_WIRE_BYTES;
    }
  } else if (which == 9) {
    kf_decl_summary s;
    v = kf_decode_summary(in, len, PEER, &s, why, 512);
    if (v == 0) FUZZ_REQUIRE(s.ntensors >= 0 && s.shape.min_buckets >= 1 && s.shape.pad == 0 && s.pad == 0);
    if (v == 0) {
      kf_encode_summary(&s, again);
      n = KF_SUMMARY_WIRE_BYTES;
    }
  } else {
    kf_decl_diff d;
    v = kf_decode_diff(in, len, PEER, &d, why, 512);
    if (v == 0) FUZZ_REQUIRE(d.has ? d.first_diff >= 0 && d.decl.count >= 1 : d.decl.count == 0);
    if (v == 0) {
      kf_encode_diff(&d, again);
      n = KF_DIFF_WIRE_BYTES;
    }
  }
  check(v, in, len, again, n, why, "rank 3 sent");
}

static void fusion_list(int which, int count, const uint8_t *in, size_t len, char *why) {
  kf_decl decl[MAX_LIST];
  int order[MAX_LIST];
  uint8_t again[MAX_LIST * KF_DECL_WIRE_BYTES];
  size_t n = 0;
  int v;
  if (which == 7) {
    v = kf_decode_decls(in, len, PEER, count, decl, why, 512);
    for (int i = 0; v == 0 && i < count; i++) FUZZ_REQUIRE(decl[i].count >= 1 && decl[i].dtype >= 0);
    if (v == 0) {
      kf_encode_decls(decl, count, again);
      n = (size_t)count * KF_DECL_WIRE_BYTES;
    }
  } else {
    v = kf_decode_order(in, len, PEER, count, order, why, 512);
    if (v == 0) FUZZ_REQUIRE(kf_order_valid(order, count));
    if (v == 0) {
      kf_encode_order(order, count, again);
      n = (size_t)count * 4;
    }
  }
  check(v, in, len, again, n, why, "rank 3 sent");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  int which = data[0] % 11, param = 1 + data[1] % MAX_LIST;
  const uint8_t *in = data + 2;
  size_t len = size - 2;
  char why[512];
  memset(why, 'x', sizeof why); /* an unterminated sentence would show */
  if (which == 0) unique_id(in, len, why);
  else if (which <= 5) comm_records(which, param, in, len, why);
  else if (which == 7 || which == 8) fusion_list(which, param - 1, in, len, why);
  else fusion_record(which, in, len, why);
  return 0;
}
