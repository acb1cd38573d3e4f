/* clock.c - kolo's clock and its naps (see clock.h). */
#include "common/clock.h"

#include <time.h>

int64_t kolo_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t kolo_deadline(int timeout_ms) { return timeout_ms > 0 ? kolo_now_ms() + timeout_ms : 0; }

void kolo_nap_us(long us) {
  struct timespec ts = {0, us * 1000L};
  nanosleep(&ts, NULL);
}
