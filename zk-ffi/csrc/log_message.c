/* The one C-variadic entry point of the ABI. It formats the message and hands it to the Rust
 * side, which owns the log level, the stream and the per-handle callback.
 *
 * The exported name `log_message` is a Rust naked function jumping here, because rustc's export
 * list for a cdylib keeps only Rust-defined symbols; this function stays hidden. */
#include <stdarg.h>
#include <stdio.h>

typedef void (*zkrs_log_callback)(const char *message);

void zkrs_log_emit(zkrs_log_callback callback, int level, int line, const char *func, const char *message);

/* Read through the GOT: when an executable holds a copy-relocated `logLevel`, that copy is the
 * one the application writes, and the one we must read. */
extern int logLevel;

int zkrs_log_level(void) { return logLevel; }
void zkrs_set_log_level(int level) { logLevel = level; }

void zkrs_log_message_v(zkrs_log_callback callback, int level, int line, const char *func,
                        const char *format, ...) {
    char message[2048];
    va_list ap;
    if (format == NULL) {
        return;
    }
    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    zkrs_log_emit(callback, level, line, func, message);
}
