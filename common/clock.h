/* clock.h - kolo's clock and its naps: monotonic milliseconds for every
 * deadline, and the short sleep of a polling loop. */
#ifndef KOLO_COMMON_CLOCK_H
#define KOLO_COMMON_CLOCK_H

#include <stdint.h>

/* Monotonic milliseconds. */
int64_t kolo_now_ms(void);
/* Deadline timeout_ms from now; 0 when timeout_ms <= 0 (no bound). */
int64_t kolo_deadline(int timeout_ms);
/* Sleeps about `us` microseconds (0..999999), between two looks of a
 * polling loop: a signal may end it early, which the loop's next look
 * absorbs. */
void kolo_nap_us(long us);

#endif
