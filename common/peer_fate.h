/* peer_fate.h - how a peer went, as the error state words it: gone without
 * a word, or with a goodbye that says it left or exited.  The bootstrap
 * finds a peer's fate; the executors and the communicator put it into
 * sentences, so the words live here, below them all. */
#ifndef KOLO_COMMON_PEER_FATE_H
#define KOLO_COMMON_PEER_FATE_H

/* KOLO_PEER_ALIVE (0) while a peer's connection is up, else how it went. */
enum { KOLO_PEER_ALIVE = 0, KOLO_PEER_LOST = 1, KOLO_PEER_LEFT = 2, KOLO_PEER_EXITED = 3 };

/* "left (destroyed its communicator)", ... : what follows "rank 3 ". */
const char *kolo_peer_fate_text(int fate);

#endif
