/* iface_select.h - which network interfaces KOLO_SOCKET_IFNAME selects.
 *
 * NCCL's syntax (NCCL_SOCKET_IFNAME): a comma-separated list of interface
 * name prefixes ("eth,ib"); a leading "^" turns it into a list of
 * interfaces to leave out ("^lo,docker"), a leading "=" (after any "^")
 * makes the names exact ("=eth0").  Empty entries are skipped.  Pure code
 * (no sockets, no environment): unit-tested and fuzzed alone. */
#ifndef KOLO_TRANSPORT_IFACE_SELECT_H
#define KOLO_TRANSPORT_IFACE_SELECT_H

/* 1 when interface `name` is selected by `spec` (any length), else 0. */
int kolo_iface_match(const char *spec, const char *name);

#endif
