/* zkrs: the logging macros and log_message, as programs built against Apache's client use them. */
#ifndef ZK_LOG_H_
#define ZK_LOG_H_

#include <zookeeper.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's log level (ZOO_LOG_LEVEL_*); zoo_set_debug_level changes it. */
extern ZOOAPI ZooLogLevel logLevel;

#define LOGCALLBACK(_zh) zoo_get_log_callback(_zh)
#define LOGSTREAM NULL

/* Each macro tests the level first, so the arguments are not evaluated when filtered out. */
#define LOG_ERROR(_cb, ...) if (logLevel >= ZOO_LOG_LEVEL_ERROR) \
    log_message(_cb, ZOO_LOG_LEVEL_ERROR, __LINE__, __func__, __VA_ARGS__)
#define LOG_WARN(_cb, ...) if (logLevel >= ZOO_LOG_LEVEL_WARN) \
    log_message(_cb, ZOO_LOG_LEVEL_WARN, __LINE__, __func__, __VA_ARGS__)
#define LOG_INFO(_cb, ...) if (logLevel >= ZOO_LOG_LEVEL_INFO) \
    log_message(_cb, ZOO_LOG_LEVEL_INFO, __LINE__, __func__, __VA_ARGS__)
#define LOG_DEBUG(_cb, ...) if (logLevel == ZOO_LOG_LEVEL_DEBUG) \
    log_message(_cb, ZOO_LOG_LEVEL_DEBUG, __LINE__, __func__, __VA_ARGS__)

/* Formats a log line (time, pid, thread, level, function, line, message) and hands it to
 * `callback`, or writes it to the log stream (stderr by default) when callback is NULL. */
ZOOAPI void log_message(log_callback_fn callback, ZooLogLevel curLevel, int line,
                        const char *funcName, const char *format, ...);

/* The stream log lines go to when no callback is set. */
FILE *zoo_get_log_stream(void);

#ifdef __cplusplus
}
#endif

#endif
