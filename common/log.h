/* log.h - leveled logging to stderr or KOLO_DEBUG_FILE.
 *
 * KOLO_DEBUG=WARN|INFO|TRACE selects the level (default: none, but errors
 * recorded with kolo_error() are still printed at WARN when KOLO_DEBUG is
 * set).  KOLO_NOTICE lines show at the default level too; only an explicit
 * KOLO_DEBUG=NONE hides them.  The macros test the level before formatting
 * anything.  Thread safe.
 */
#ifndef KOLO_COMMON_LOG_H
#define KOLO_COMMON_LOG_H

enum kolo_log_level {
  KOLO_LOG_NONE = 0,
  KOLO_LOG_WARN = 1,
  KOLO_LOG_INFO = 2,
  KOLO_LOG_TRACE = 3
};

/* Current level; reads KOLO_DEBUG once per process (again after fork, and
 * after kolo_log_reset). */
int kolo_log_level(void);
/* 1 when notices are shown: at the default level (KOLO_DEBUG unset) and at
 * WARN or above; 0 only under an explicit KOLO_DEBUG=NONE. */
int kolo_log_notices(void);
/* Makes the next kolo_log_level() read KOLO_DEBUG and KOLO_DEBUG_FILE again. */
void kolo_log_reset(void);
void kolo_log_write(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define KOLO_LOG_AT(lvl, ...)                                                \
  do {                                                                       \
    if (kolo_log_level() >= (lvl))                                           \
      kolo_log_write((lvl), __FILE__, __LINE__, __VA_ARGS__);                \
  } while (0)
#define KOLO_WARN(...) KOLO_LOG_AT(KOLO_LOG_WARN, __VA_ARGS__)
#define KOLO_INFO(...) KOLO_LOG_AT(KOLO_LOG_INFO, __VA_ARGS__)
#define KOLO_TRACE(...) KOLO_LOG_AT(KOLO_LOG_TRACE, __VA_ARGS__)
/* A warning the user must see even without KOLO_DEBUG (a guessable secret,
 * a malformed setting, a wait that may hang): written as a WARN line. */
#define KOLO_NOTICE(...)                                                     \
  do {                                                                       \
    if (kolo_log_notices())                                                  \
      kolo_log_write(KOLO_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__);        \
  } while (0)

#endif
