/* gen_corpus.c - writes the seed corpora of the wire's fuzz targets
 * (tests/fuzz/corpus/<target>/): valid messages made by kolo's encoders.
 * Run from the repository root after a wire format change (it links
 * kolo_static, built in the fuzz build):
 *   cmake --build build-fuzz --target kolo_gen_corpus && build-fuzz/fuzz/kolo_gen_corpus
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "core/comm_wire.h"
#include "core/proto_select.h"
#include "fusion/negotiate_wire.h"
#include "kolo_fusion.h"
#include "ring/algo.h"
#include "transport/bootstrap_wire.h"
#include "transport/conn_wire.h"
#include "transport/net_wire.h"

static void put_file(const char *target, const char *name, const uint8_t *p, size_t n) {
  char path[256];
  snprintf(path, sizeof path, "tests/fuzz/corpus/%s/%s", target, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

static kolo_peer_info info(int rank) {
  kolo_peer_info p;
  memset(&p, 0, sizeof p);
  struct sockaddr_in *a = (struct sockaddr_in *)&p.addr;
  a->sin_family = AF_INET;
  a->sin_port = htons((uint16_t)(40000 + rank));
  a->sin_addr.s_addr = htonl(0x7f000001u);
  p.host_hash = 0x1111;
  p.proc_token = 0x2222 + (uint64_t)rank;
  p.pid = 1000 + rank;
  p.rank = rank;
  return p;
}

static kolo_rank_hello hello(int rank, int nranks, int nids, int role) {
  kolo_rank_hello h;
  memset(&h, 0, sizeof h);
  memset(h.secret, 0x5a, sizeof h.secret);
  h.rank = role == KOLO_HELLO_SUBROOT ? -1 : rank;
  h.nranks = nranks;
  h.nids = nids;
  h.role = role;
  h.root_index = role == KOLO_HELLO_SUBROOT ? 1 : kolo_root_of(rank, nranks, nids);
  h.first.magic = KOLO_UID_MAGIC;
  h.first.root = info(0).addr;
  if (role == KOLO_HELLO_RANK) h.info = info(rank);
  return h;
}

static void root_hello(void) {
  uint8_t m[2 * KOLO_WIRE_HDR_BYTES + KOLO_RANK_HELLO_BYTES + 4 * KOLO_PEER_INFO_BYTES];
  kolo_rank_hello h = hello(2, 4, 1, KOLO_HELLO_RANK);
  kolo_encode_header(m, KOLO_TAG_RANK_HELLO, KOLO_RANK_HELLO_BYTES);
  kolo_encode_rank_hello(&h, m + KOLO_WIRE_HDR_BYTES);
  put_file("root_hello", "rank", m, KOLO_WIRE_HDR_BYTES + KOLO_RANK_HELLO_BYTES);
  h = hello(0, 8, 2, KOLO_HELLO_SUBROOT); /* root 1 of 2: ranks 4..7 */
  kolo_encode_rank_hello(&h, m + KOLO_WIRE_HDR_BYTES);
  kolo_peer_info t[8];
  for (int r = 0; r < 8; r++) t[r] = info(r);
  uint8_t *b = m + KOLO_WIRE_HDR_BYTES + KOLO_RANK_HELLO_BYTES;
  kolo_encode_header(b, KOLO_TAG_BLOCK, 4 * KOLO_PEER_INFO_BYTES);
  kolo_encode_peer_table(t, 4, 8, b + KOLO_WIRE_HDR_BYTES);
  put_file("root_hello", "subroot_block", m, sizeof m);
}

static void root_reply(void) {
  uint8_t m[1 + KOLO_WIRE_HDR_BYTES + KOLO_PEER_INFO_BYTES];
  kolo_peer_info before = info(2);
  m[0] = 2; /* rank 3's ring predecessor */
  kolo_encode_header(m + 1, KOLO_TAG_NEIGHBOR, KOLO_PEER_INFO_BYTES);
  kolo_encode_peer_info(&before, m + 1 + KOLO_WIRE_HDR_BYTES);
  put_file("root_reply", "neighbor", m, sizeof m);
  uint8_t r[1 + KOLO_WIRE_HDR_BYTES + KOLO_REFUSAL_MAX_BYTES];
  r[0] = 0;
  size_t n = kolo_encode_refusal(koloInvalidUsage, "root 1.2.3.4:5 refused rank 3: nranks 4 differs from rank 0's 8",
                                 r + 1 + KOLO_WIRE_HDR_BYTES);
  kolo_encode_header(r + 1, KOLO_TAG_REFUSED, n);
  put_file("root_reply", "refusal", r, 1 + KOLO_WIRE_HDR_BYTES + n);
}

static void mesh_hello(void) {
  uint8_t m[2 * KOLO_WIRE_HDR_BYTES + KOLO_MESH_HELLO_BYTES + KOLO_REFUSAL_MAX_BYTES];
  kolo_mesh_hello h = {{0}, 0x1234, 3, 4};
  memset(h.secret, 0x33, sizeof h.secret);
  kolo_encode_header(m, KOLO_TAG_MESH_HELLO, KOLO_MESH_HELLO_BYTES);
  kolo_encode_mesh_hello(&h, m + KOLO_WIRE_HDR_BYTES);
  uint8_t *w = m + KOLO_WIRE_HDR_BYTES + KOLO_MESH_HELLO_BYTES;
  kolo_encode_header(w, KOLO_TAG_GOODBYE, KOLO_GOODBYE_BYTES);
  kolo_wire_out o = kolo_wire_writer(w + KOLO_WIRE_HDR_BYTES, KOLO_GOODBYE_BYTES);
  kolo_put_u32(&o, KOLO_BYE_EXITED);
  kolo_put_i32(&o, 2); /* the rank blamed */
  put_file("mesh_hello", "hello_goodbye", m, 2 * KOLO_WIRE_HDR_BYTES + KOLO_MESH_HELLO_BYTES + KOLO_GOODBYE_BYTES);
  size_t n = kolo_encode_refusal(koloInvalidUsage, "rank 0 refused a mesh connection", w + KOLO_WIRE_HDR_BYTES);
  kolo_encode_header(w, KOLO_TAG_REFUSED, n);
  put_file("mesh_hello", "hello_refusal", m, 2 * KOLO_WIRE_HDR_BYTES + KOLO_MESH_HELLO_BYTES + n);
  kolo_encode_header(w, KOLO_TAG_MESH_VERDICT, KOLO_VERDICT_BYTES);
  kolo_encode_verdict(KOLO_MESH_CROSSED, w + KOLO_WIRE_HDR_BYTES);
  put_file("mesh_hello", "hello_verdict", m, 2 * KOLO_WIRE_HDR_BYTES + KOLO_MESH_HELLO_BYTES + KOLO_VERDICT_BYTES);
  kolo_peer_info five = info(5);
  kolo_encode_header(w, KOLO_TAG_NEXT, KOLO_PEER_INFO_BYTES);
  kolo_encode_peer_info(&five, w + KOLO_WIRE_HDR_BYTES);
  put_file("mesh_hello", "hello_next", m, 2 * KOLO_WIRE_HDR_BYTES + KOLO_MESH_HELLO_BYTES + KOLO_PEER_INFO_BYTES);
  kolo_peer_info t[3] = {info(0), info(1), info(2)};
  kolo_encode_header(w, KOLO_TAG_PEERS, 3 * KOLO_PEER_INFO_BYTES);
  kolo_encode_peer_table(t, 0, 3, w + KOLO_WIRE_HDR_BYTES);
  put_file("mesh_hello", "hello_peers", m, 2 * KOLO_WIRE_HDR_BYTES + KOLO_MESH_HELLO_BYTES + 3 * KOLO_PEER_INFO_BYTES);
}

/* A hello, then what follows it on an ib connection: a ring, a stop word
 * with its report and one without (each after a 2-byte length), and a
 * credit record and a signature header at the end (fuzz_ib_handshake.c). */
static void ib_records(const kolo_ib_hello *ih) {
  uint8_t m[KOLO_IB_HELLO_BYTES + 3 * (2 + KOLO_IB_MSG_MAX) + KOLO_IB_SIGHDR_BYTES + KOLO_IB_CREDIT_BYTES];
  size_t at = KOLO_IB_HELLO_BYTES;
  kolo_encode_ib_hello(ih, m);
  kolo_ib_msg msgs[3] = {{.kind = KOLO_IB_MSG_RING, .ring = {2, 40, 0x7f0000100000ull, 0x77, 8, 524288, 224}},
                         {.kind = KOLO_IB_MSG_STOP, .flags = KOLO_IB_FLAG_REPORT, .value = 0x07000002u,
                          .report = {{0, 1}, {{16, 3, 0, 1, 7, 0, 1}, {17, 3, 0, 1, 7, 0, 1}}}},
                         {.kind = KOLO_IB_MSG_STOP, .value = 0x03000001u}};
  for (int i = 0; i < 3; i++) {
    size_t n = kolo_encode_ib_msg(&msgs[i], m + at + 2);
    m[at] = (uint8_t)n, m[at + 1] = (uint8_t)(n >> 8);
    at += 2 + n;
  }
  kolo_call_sig sig = {4096, 9, -1, 1, 7, 0, 1};
  kolo_encode_ib_sighdr(&sig, m + at);
  kolo_encode_ib_credit(41, m + at + KOLO_IB_SIGHDR_BYTES);
  put_file("ib_handshake", "hello_msgs_records", m, at + KOLO_IB_SIGHDR_BYTES + KOLO_IB_CREDIT_BYTES);
}

static void net_corpus(void) {
  kolo_sock_hello sh = {2, 3, {0}};
  memset(sh.token, 0x77, sizeof sh.token);
  uint8_t m[KOLO_SOCK_HELLO_BYTES + 4 * KOLO_SOCK_HDR_BYTES + KOLO_NET_REPORT_BYTES];
  kolo_encode_sock_hello(&sh, m);
  const kolo_sock_frame fr[4] = {{KOLO_SOCK_DATA, KOLO_SOCK_FLAG_SIG, 0, 1, 0},
                                 {KOLO_SOCK_DATA, 0, 1, 4096, 48},
                                 {KOLO_SOCK_CREDIT, 0, 5, 0, 0},
                                 {KOLO_SOCK_STOP, KOLO_SOCK_FLAG_REPORT, 0x07000002u, 0, 0}};
  for (int i = 0; i < 4; i++) kolo_encode_sock_frame(m + KOLO_SOCK_HELLO_BYTES + i * KOLO_SOCK_HDR_BYTES, &fr[i]);
  kolo_call_mismatch mm = {{0, 1}, {{16, 3, 0, 1, 7, 0, 1}, {17, 3, 0, 1, 7, 0, 1}}};
  kolo_encode_mismatch(&mm, m + KOLO_SOCK_HELLO_BYTES + 4 * KOLO_SOCK_HDR_BYTES);
  put_file("socket_frame", "hello_frames_report", m, sizeof m);
  kolo_ib_hello ih;
  memset(&ih, 0, sizeof ih);
  ih.nqps = 2;
  memset(ih.token, 0x42, sizeof ih.token);
  ih.qpn[0] = 0x11, ih.qpn[1] = 0x12, ih.psn[0] = 0x123456, ih.psn[1] = 0x654321;
  ih.gid[10] = 0xff, ih.gid[11] = 0xff, ih.gid[12] = 10, ih.gid[15] = 2;
  ih.lid = 0, ih.link_layer = 2, ih.mtu = 3;
  ih.in_addr = 0x7f1234560000ull, ih.in_rkey = 0x1a2b, ih.in_bytes = 16384;
  snprintf(ih.dev, sizeof ih.dev, "rxe0");
  uint8_t b[KOLO_IB_HELLO_BYTES];
  kolo_encode_ib_hello(&ih, b);
  put_file("ib_handshake", "roce_2qps", b, sizeof b);
  ih.link_layer = 1, ih.lid = 7, ih.nqps = 1, ih.mtu = 5;
  snprintf(ih.dev, sizeof ih.dev, "mlx5_0");
  kolo_encode_ib_hello(&ih, b);
  put_file("ib_handshake", "ib_1qp", b, sizeof b);
  ib_records(&ih);
}

/* One offer per transport, as connect.c sends it (transport numbers as in
 * its table: local 0, shm 1, p2p 2, net 3). */
static void put_offer(const char *name, uint32_t transport, const uint8_t desc[KOLO_CONN_DESC_BYTES]) {
  kolo_conn_offer o = {transport, 1 << 20, 8, transport == 2 ? 4096 : 0, {0}};
  memcpy(o.desc, desc, sizeof o.desc);
  uint8_t m[KOLO_CONN_OFFER_BYTES];
  kolo_encode_conn_offer(&o, m);
  put_file("conn_desc", name, m, sizeof m);
}

static void conn_corpus(void) {
  uint8_t d[KOLO_CONN_DESC_BYTES];
  kolo_encode_local_desc(0x00007f0012345000ull, d);
  put_offer("local", 0, d);
  kolo_encode_shm_desc("/kolo-00000000deadbeef-4242-1-0-1000", d);
  put_offer("shm", 1, d);
  kolo_p2p_desc p = {KOLO_P2P_LOCAL, 0, 4096 + (8 << 20), 0x00007f00aabbcc00ull, {0}};
  kolo_encode_p2p_desc(&p, d);
  put_offer("p2p_local", 2, d);
  p = (kolo_p2p_desc){KOLO_P2P_IPC, 1, 4096 + (8 << 20), 0, {0}};
  memset(p.ipc, 0xa5, sizeof p.ipc);
  kolo_encode_p2p_desc(&p, d);
  put_offer("p2p_ipc", 2, d);
  kolo_net_listen_info l = {KOLO_NET_HANDLE_SOCK_MAGIC, info(1).addr, {0}, 2};
  memset(l.token, 0x3c, sizeof l.token);
  kolo_net_handle h;
  kolo_encode_net_handle(&l, &h);
  kolo_encode_net_desc(&h, "socket", d);
  put_offer("net_socket", 3, d);
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&l.addr;
  memset(&l.addr, 0, sizeof l.addr);
  a6->sin6_family = AF_INET6;
  a6->sin6_port = htons(41000);
  a6->sin6_addr.s6_addr[15] = 1;
  l.magic = KOLO_NET_HANDLE_IB_MAGIC;
  l.nconns = 4;
  kolo_encode_net_handle(&l, &h);
  kolo_encode_net_desc(&h, "ib", d);
  put_offer("net_ib6", 3, d);
}

/* fuzz_rank_records: selector byte, parameter byte, the record (from
 * rank 3, the sender the target names). */
static void put_record(const char *name, uint8_t which, uint8_t param, const uint8_t *p, size_t n) {
  uint8_t m[2 + KOLO_UNIQUE_ID_BYTES + 64];
  m[0] = which;
  m[1] = param;
  memcpy(m + 2, p, n);
  put_file("rank_records", name, m, 2 + n);
}

static void uid_records(void) {
  kolo_uid u;
  memset(&u, 0, sizeof u);
  u.magic = KOLO_UID_MAGIC;
  u.job = 0x1234;
  memset(u.secret, 0x5a, sizeof u.secret);
  u.root = info(0).addr;
  koloUniqueId id;
  kolo_uid_encode(&u, &id);
  put_record("uid_v4", 0, 0, (const uint8_t *)id.internal, sizeof id.internal);
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&u.root;
  memset(&u.root, 0, sizeof u.root);
  a6->sin6_family = AF_INET6;
  a6->sin6_port = htons(41000);
  a6->sin6_addr.s6_addr[15] = 1;
  u.magic = KOLO_UID_MAGIC_ROOT_AT_INIT;
  kolo_uid_encode(&u, &id);
  put_record("uid_v6_env", 0, 0, (const uint8_t *)id.internal, sizeof id.internal);
  kolo_shrink_msg m = {id, 0xfeed, 5};
  uint8_t b[KOLO_SHRINK_MSG_BYTES];
  kolo_encode_shrink_msg(&m, b);
  put_record("shrink", 3, 7, b, sizeof b); /* 8 ranks */
}

static void comm_records(void) {
  uint8_t b[KOLO_COMM_SHAPE_BYTES]; /* the largest of these records */
  kolo_comm_shape s = {.nchannels = 4, .nslots = 8, .memory = koloMemCuda, .ll_slot_bytes = 8192,
                       .slot_bytes = 1 << 20, .ll_threshold = 1 << 16, .algo = -1,
                       .proto_off = KOLO_PROTO_OFF_LL, /* KOLO_PROTO=allreduce:Simple */
                       .ag_allowed = 1u << KOLO_ALGO_BRUCK, /* KOLO_ALGO=allgather:bruck */
                       .min_channel_bytes = 1 << 18,        /* KOLO_MIN_CHANNEL_BYTES */
                       .reduce_allowed = 1u << KOLO_ALGO_TREE, /* KOLO_ALGO=reduce:tree */
                       .host_cpus = 2, .host_ranks = 4,       /* 4 ranks on a host of 2 CPUs */
                       .net_chunk_bytes = 1 << 18};           /* KOLO_NET_CHUNK_BYTES */
  kolo_encode_comm_shape(&s, b);
  put_record("shape", 1, 0, b, KOLO_COMM_SHAPE_BYTES);
  kolo_split_entry e = {1, -2, 3};
  kolo_encode_split_entry(&e, b);
  put_record("split", 2, 0, b, KOLO_SPLIT_ENTRY_BYTES);
  kolo_device_choice c = {0, 1, 2};
  kolo_encode_device_choice(&c, b);
  put_record("device_choice", 4, 0, b, KOLO_DEVICE_CHOICE_BYTES);
  kolo_device_room r = {0, 1, 132, 2, 2, 0, 0x5eedull};
  kolo_encode_device_room(&r, b);
  put_record("device_room", 5, 7, b, KOLO_DEVICE_ROOM_BYTES);
}

static void fusion_records(void) {
  uint8_t b[64];
  kf_view v = {{7, 0xabcdef, 1, 4}, 3, 1, 3, 2, 0, 1};
  kf_encode_view(&v, b);
  put_record("view", 6, 0, b, KF_VIEW_WIRE_BYTES);
  kf_decl d[3] = {{1000, koloFloat32, KOLO_FUSION_ALLOCATE}, {10, koloFloat16, KOLO_FUSION_EXTERNAL},
                  {1, koloInt8, KOLO_FUSION_ALLOCATE}};
  kf_encode_decls(d, 3, b);
  put_record("decls", 7, 3, b, 3 * KF_DECL_WIRE_BYTES);
  int order[4] = {2, 0, 3, 1};
  kf_encode_order(order, 4, b);
  put_record("order", 8, 4, b, 16);
  kf_decl_summary s = {{1 << 20, 1 << 16, 1 << 22, 1.0, koloAvg, 0, 1, 0}, 0x5555, 3, 0};
  kf_encode_summary(&s, b);
  put_record("summary", 9, 0, b, KF_SUMMARY_WIRE_BYTES);
  kf_decl_diff f = {1, 1, {11, koloFloat16, KOLO_FUSION_EXTERNAL}};
  kf_encode_diff(&f, b);
  put_record("diff", 10, 0, b, KF_DIFF_WIRE_BYTES);
}

int main(void) {
  root_hello();
  root_reply();
  mesh_hello();
  net_corpus();
  conn_corpus();
  uid_records();
  comm_records();
  fusion_records();
  return 0;
}
