/* redop.c - koloRedOpCreatePreMulSum / koloRedOpDestroy and binding a
 * call to its op (see redop.h). */
#include "core/redop.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "core/comm_state.h"
#include "kernels/fp8_convert.h"

#define SLOT_BITS 12
#define GEN_BITS 7
#define TAG_BITS 11
#define MAX_SLOTS (1 << SLOT_BITS)

typedef struct {
  int live;
  unsigned gen;      /* bumped when the slot is freed */
  koloDataType_t type;
  int premul;        /* KOLO_PREMUL_VALUE or KOLO_PREMUL_POINTER */
  uint64_t scalar;   /* the value's bits, or its address */
} redop_entry;

struct kolo_redop_table {
  unsigned tag;
  int cap;
  redop_entry *e;
};

static unsigned next_tag(void) {
  static _Atomic unsigned counter;
  return atomic_fetch_add(&counter, 1u) & ((1u << TAG_BITS) - 1u);
}

static koloRedOp_t encode(unsigned tag, unsigned gen, int slot) {
  unsigned v = tag << (GEN_BITS + SLOT_BITS) | gen << SLOT_BITS | (unsigned)slot;
  return (koloRedOp_t)((int)koloNumOps + (int)v);
}

/* The parts of a user op value; 0 when it cannot be one (out of range). */
static int decode(koloRedOp_t op, unsigned *tag, unsigned *gen, int *slot) {
  if ((int)op < (int)koloNumOps) return 0;
  unsigned v = (unsigned)((int)op - (int)koloNumOps);
  if (v >> (TAG_BITS + GEN_BITS + SLOT_BITS)) return 0;
  *tag = v >> (GEN_BITS + SLOT_BITS);
  *gen = (v >> SLOT_BITS) & ((1u << GEN_BITS) - 1u);
  *slot = (int)(v & (MAX_SLOTS - 1u));
  return 1;
}

/* A free slot of comm's table (grown, or made, as needed); -1 when out of
 * memory or every slot is live. */
static int take_slot(struct koloComm *c) {
  struct kolo_redop_table *t = c->redops;
  if (t == NULL) {
    if ((t = calloc(1, sizeof *t)) == NULL) return -1;
    t->tag = next_tag();
    c->redops = t;
  }
  for (int i = 0; i < t->cap; i++)
    if (!t->e[i].live) return i;
  if (t->cap == MAX_SLOTS) return -1;
  int cap = t->cap ? 2 * t->cap : 8;
  redop_entry *e = realloc(t->e, (size_t)cap * sizeof *e);
  if (e == NULL) return -1;
  memset(e + t->cap, 0, (size_t)(cap - t->cap) * sizeof *e);
  t->e = e;
  int slot = t->cap;
  t->cap = cap;
  return slot;
}

koloResult_t koloRedOpCreatePreMulSum(koloRedOp_t *op, void *scalar, koloDataType_t datatype,
                                      koloScalarResidence_t residence, koloComm_t comm) {
  const char *fn = "koloRedOpCreatePreMulSum";
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "%s: comm is NULL", fn);
  if (atomic_load(&comm->finalized))
    return kolo_error(&comm->err, koloInvalidUsage,
                      "%s: rank %d: the communicator was finalized (koloCommFinalize)", fn, comm->rank);
  if (op == NULL) return kolo_error(&comm->err, koloInvalidArgument, "%s: op is NULL", fn);
  if (scalar == NULL) return kolo_error(&comm->err, koloInvalidArgument, "%s: scalar is NULL", fn);
  if ((int)datatype < 0 || datatype >= koloNumTypes)
    return kolo_error(&comm->err, koloInvalidArgument, "%s: datatype %d is not a koloDataType_t", fn,
                      (int)datatype);
  if (residence != koloScalarDevice && residence != koloScalarHostImmediate)
    return kolo_error(&comm->err, koloInvalidArgument,
                      "%s: residence %d is neither koloScalarDevice nor koloScalarHostImmediate", fn,
                      (int)residence);
  int slot = take_slot(comm);
  if (slot < 0)
    return kolo_error(&comm->err, koloSystemError, "%s: rank %d: out of memory, or %d ops are live already",
                      fn, comm->rank, MAX_SLOTS);
  redop_entry *e = &comm->redops->e[slot];
  e->live = 1;
  e->type = datatype;
  e->premul = residence == koloScalarHostImmediate ? KOLO_PREMUL_VALUE : KOLO_PREMUL_POINTER;
  e->scalar = (uint64_t)(uintptr_t)scalar;
  if (residence == koloScalarHostImmediate) {
    e->scalar = 0;
    memcpy(&e->scalar, scalar, koloTypeSize(datatype)); /* little endian, as the executors read it */
  }
  *op = encode(comm->redops->tag, e->gen, slot);
  return koloSuccess;
}

/* The live entry of op on comm, or NULL with a sentence in comm's buffer
 * (koloInvalidArgument in *res). */
static redop_entry *find(const char *fn, struct koloComm *c, koloRedOp_t op, koloResult_t *res) {
  unsigned tag, gen;
  int slot;
  struct kolo_redop_table *t = c->redops;
  *res = koloInvalidArgument;
  if (!decode(op, &tag, &gen, &slot)) {
    kolo_error(&c->err, *res, "%s: op %d is not a koloRedOp_t", fn, (int)op);
    return NULL;
  }
  if (t == NULL || tag != t->tag) {
    kolo_error(&c->err, *res,
               "%s: op %d was not made on this communicator (rank %d) by koloRedOpCreatePreMulSum: it "
               "belongs to another communicator", fn, (int)op, c->rank);
    return NULL;
  }
  if (slot >= t->cap || !t->e[slot].live || t->e[slot].gen != gen) {
    kolo_error(&c->err, *res, "%s: op %d was destroyed (koloRedOpDestroy) on this communicator (rank %d)",
               fn, (int)op, c->rank);
    return NULL;
  }
  *res = koloSuccess;
  return &t->e[slot];
}

koloResult_t koloRedOpDestroy(koloRedOp_t op, koloComm_t comm) {
  const char *fn = "koloRedOpDestroy";
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "%s: comm is NULL", fn);
  if ((int)op >= 0 && (int)op < (int)koloNumOps)
    return kolo_error(&comm->err, koloInvalidArgument, "%s: op %d is a built-in koloRedOp_t", fn, (int)op);
  koloResult_t res;
  redop_entry *e = find(fn, comm, op, &res);
  if (e == NULL) return res;
  e->live = 0;
  e->gen = (e->gen + 1u) & ((1u << GEN_BITS) - 1u);
  return koloSuccess;
}

/* NCCL's float8 average: a premul-sum by 1/nranks rounded to the type. */
static void fp8_average(kolo_op *op) {
  float inv = (float)(1.0 / op->comm->nranks);
  op->op = koloSum;
  op->premul = KOLO_PREMUL_VALUE;
  op->scalar = op->type == koloFloat8e4m3 ? kolo_float_to_e4m3(inv) : kolo_float_to_e5m2(inv);
}

koloResult_t kolo_redop_resolve(const char *fn, kolo_op *op) {
  struct koloComm *c = op->comm;
  op->premul = KOLO_PREMUL_NONE;
  op->scalar = 0;
  if ((int)op->op < 0)
    return kolo_error(&c->err, koloInvalidArgument, "%s: op %d is not a koloRedOp_t", fn, (int)op->op);
  if (op->op == koloAvg && (op->type == koloFloat8e4m3 || op->type == koloFloat8e5m2)) fp8_average(op);
  if ((int)op->op < (int)koloNumOps) return koloSuccess;
  koloResult_t res;
  const redop_entry *e = find(fn, c, op->op, &res);
  if (e == NULL) return res;
  if (e->type != op->type)
    return kolo_error(&c->err, koloInvalidArgument,
                      "%s: op %d was made for %s (koloRedOpCreatePreMulSum) and the call's datatype is %s", fn,
                      (int)op->op, kolo_type_name(e->type), kolo_type_name(op->type));
  op->op = koloSum;
  op->premul = e->premul;
  op->scalar = e->scalar;
  return koloSuccess;
}

void kolo_redop_free(struct koloComm *c) {
  if (c->redops == NULL) return;
  free(c->redops->e);
  free(c->redops);
  c->redops = NULL;
}
