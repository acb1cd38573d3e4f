/* ib_select.h - which RDMA devices and ports KOLO_IB_HCA selects.
 *
 * NCCL's syntax (NCCL_IB_HCA): a comma-separated list of device names,
 * each optionally with ":port" ("mlx5_0:1,mlx5_1").  Names are prefixes
 * ("mlx5" selects mlx5_0 and mlx5_1) unless the list starts with "=" (exact
 * names); a leading "^" turns the list into one of devices to leave out
 * ("^=mlx5_2" keeps all but mlx5_2).  An empty or missing list selects
 * everything.  Pure code (no verbs): unit-tested without hardware. */
#ifndef KOLO_TRANSPORT_IB_SELECT_H
#define KOLO_TRANSPORT_IB_SELECT_H

#include <stddef.h>

#define KOLO_IB_HCA_MAX 32
#define KOLO_IB_HCA_NAME 64

typedef struct {
  char name[KOLO_IB_HCA_NAME];
  int port; /* 0: any port */
} kolo_ib_hca_entry;

typedef struct {
  int exclude; /* "^": the entries are left out */
  int exact;   /* "=": names are whole names, not prefixes */
  int n;       /* 0: everything is selected */
  kolo_ib_hca_entry e[KOLO_IB_HCA_MAX];
} kolo_ib_hca_list;

/* Parses spec (NULL or "" selects everything).  0, or -1 with a sentence
 * in why (naming the bad entry) for an empty name, a bad port, a name too
 * long or too many entries. */
int kolo_ib_hca_parse(const char *spec, kolo_ib_hca_list *out, char *why, size_t why_len);
/* 1 when device `dev`, port `port` (1-based) is selected by the list. */
int kolo_ib_hca_match(const kolo_ib_hca_list *l, const char *dev, int port);

#endif
