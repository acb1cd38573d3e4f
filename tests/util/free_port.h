/* free_port.h - a TCP port on 127.0.0.1 for a test's root to listen on.
 *
 * Not from bind(port 0): that port lies in the kernel's ephemeral range,
 * where any process's outgoing connection may take it between the test
 * choosing it and the root listening (CI saw "cannot listen on
 * 127.0.0.1:49666: Address already in use").  The port is drawn at random
 * below that range instead, where only explicit binds land, and checked
 * free at the moment it is drawn. */
#ifndef KOLO_TESTS_UTIL_FREE_PORT_H
#define KOLO_TESTS_UTIL_FREE_PORT_H

#ifdef __cplusplus
extern "C" {
#endif

/* A port that was free a moment ago; -1 when none was found in 200 draws. */
int kt_free_port(void);

#ifdef __cplusplus
}
#endif

#endif
