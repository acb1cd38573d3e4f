/* peer_fate.c - see peer_fate.h. */
#include "common/peer_fate.h"

const char *kolo_peer_fate_text(int fate) {
  switch (fate) {
  case KOLO_PEER_LEFT: return "left (destroyed its communicator)";
  case KOLO_PEER_EXITED: return "exited without destroying its communicator";
  default: return "was lost without a word (killed or crashed; its connection closed)";
  }
}
