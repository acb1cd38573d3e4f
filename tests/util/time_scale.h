/* time_scale.h - the one factor every wall-clock bound of the tests scales
 * by.  A bound says how long something may take on a plain build; under a
 * sanitizer on a shared 2-core machine the same work takes several times
 * longer, and a bound that does not scale fails by accident there.
 *
 * kt_time_scale(): KOLO_TEST_TIME_SCALE when set to a number >= 1, else 5
 * under ThreadSanitizer, 3 under AddressSanitizer, 1 otherwise (the
 * sanitizer is known at compile time).  kt_ms(ms) is a bound scaled by it.
 * Only upper bounds scale: a lower bound ("waited at least the timeout")
 * holds on any machine. */
#ifndef KOLO_TESTS_UTIL_TIME_SCALE_H
#define KOLO_TESTS_UTIL_TIME_SCALE_H

#include <stdlib.h>

#if defined(__SANITIZE_THREAD__)
#define KT_SANITIZER_SCALE 5.0
#elif defined(__SANITIZE_ADDRESS__)
#define KT_SANITIZER_SCALE 3.0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KT_SANITIZER_SCALE 5.0
#elif __has_feature(address_sanitizer)
#define KT_SANITIZER_SCALE 3.0
#endif
#endif
#ifndef KT_SANITIZER_SCALE
#define KT_SANITIZER_SCALE 1.0
#endif

static inline double kt_time_scale(void) {
  const char *env = getenv("KOLO_TEST_TIME_SCALE");
  double v = env != NULL ? strtod(env, NULL) : 0;
  return v >= 1 ? v : KT_SANITIZER_SCALE;
}

/* An upper bound of ms milliseconds on a plain build, scaled. */
static inline double kt_ms(double ms) { return ms * kt_time_scale(); }

#endif
