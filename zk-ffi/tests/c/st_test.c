/* The single-threaded library: the application's loop polls the fd zookeeper_interest names and
 * calls zookeeper_process; completions and watchers run inside it, on this thread.
 * Usage: st_test host:port. Built without THREADED, linked with libzookeeper_st. */
#include <zookeeper.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>

static int failures;
#define CHECK(cond, ...) do { if (cond) { printf("ok   "); } else { printf("FAIL "); failures++; } \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static pthread_t main_thread;
static int off_thread, connected, created, got, got_len = -99, watched, deleted, steps;
static char got_buf[16];

static void note_thread(void) { if (!pthread_equal(pthread_self(), main_thread)) off_thread++; }

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)path; (void)ctx;
    note_thread();
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) connected = 1;
    if (type == ZOO_CHANGED_EVENT) watched++;
}
static void create_cb(int rc, const char *value, const void *data) {
    (void)value; (void)data; note_thread(); created = rc == ZOK ? 1 : rc;
}
static void get_cb(int rc, const char *value, int len, const struct Stat *stat, const void *data) {
    (void)stat; (void)data; note_thread();
    got = rc == ZOK ? 1 : rc;
    got_len = len;
    if (value && len > 0 && len < (int)sizeof got_buf) memcpy(got_buf, value, len);
}
static void stat_cb(int rc, const struct Stat *stat, const void *data) { (void)rc; (void)stat; (void)data; note_thread(); }
static void void_cb(int rc, const void *data) { (void)data; note_thread(); deleted = rc == ZOK ? 1 : rc; }

/* One turn of the application's loop; returns when `flag` is set or after `ms`. */
static int drive(zhandle_t *zh, int *flag, int ms) {
    for (int waited = 0; !*flag && waited < ms;) {
        int fd, interest;
        struct timeval tv;
        int rc = zookeeper_interest(zh, &fd, &interest, &tv);
        if (rc != ZOK) return rc;
        struct pollfd p = {fd, 0, 0};
        if (interest & ZOOKEEPER_READ) p.events |= POLLIN;
        if (interest & ZOOKEEPER_WRITE) p.events |= POLLOUT;
        int timeout = (int)(tv.tv_sec * 1000 + tv.tv_usec / 1000);
        if (timeout > 50) timeout = 50;
        poll(&p, fd >= 0 ? 1 : 0, timeout);
        waited += 50;
        int events = 0;
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
        if (p.revents & POLLOUT) events |= ZOOKEEPER_WRITE;
        zookeeper_process(zh, events);
        steps++;
    }
    return *flag ? ZOK : ZOPERATIONTIMEOUT;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char path[64];
    main_thread = pthread_self();
    zoo_set_debug_level(getenv("ZKDEBUG") ? ZOO_LOG_LEVEL_DEBUG : ZOO_LOG_LEVEL_ERROR);
    zhandle_t *zh = zookeeper_init(argv[1], watcher, 10000, 0, 0, 0);
    CHECK(zh != NULL, "zookeeper_init");
    CHECK(zoo_state(zh) != ZOO_CONNECTED_STATE, "not connected before the loop runs");
    CHECK(drive(zh, &connected, 10000) == ZOK, "connected through interest/process (%d turns)", steps);
    CHECK(zoo_state(zh) == ZOO_CONNECTED_STATE, "state CONNECTED");
    snprintf(path, sizeof path, "/st%d", (int)getpid());
    CHECK(zoo_acreate(zh, path, "hello", 5, &ZOO_OPEN_ACL_UNSAFE, 0, create_cb, NULL) == ZOK, "acreate queued");
    CHECK(created == 0, "completion not run before zookeeper_process");
    CHECK(drive(zh, &created, 5000) == ZOK && created == 1, "create completed: %d", created);
    CHECK(zoo_awget(zh, path, watcher, NULL, get_cb, NULL) == ZOK, "awget queued");
    CHECK(drive(zh, &got, 5000) == ZOK && got == 1 && got_len == 5 && memcmp(got_buf, "hello", 5) == 0,
          "get: len %d", got_len);
    CHECK(zoo_aset(zh, path, "x", 1, -1, stat_cb, NULL) == ZOK, "aset queued");
    CHECK(drive(zh, &watched, 5000) == ZOK && watched == 1, "data watch fired in zookeeper_process");
    CHECK(zoo_adelete(zh, path, -1, void_cb, NULL) == ZOK, "adelete queued");
    CHECK(drive(zh, &deleted, 5000) == ZOK && deleted == 1, "delete completed");
    CHECK(off_thread == 0, "every callback ran on the application's thread");
    /* Bad input on an st handle. */
    int fd, interest;
    struct timeval tv;
    CHECK(zookeeper_interest(NULL, &fd, &interest, &tv) == ZBADARGUMENTS, "interest(NULL handle)");
    CHECK(zookeeper_interest(zh, NULL, &interest, &tv) == ZBADARGUMENTS, "interest(NULL fd)");
    CHECK(zookeeper_process(NULL, 0) == ZBADARGUMENTS, "process(NULL handle)");
    CHECK(zoo_aget(zh, "bad", 0, get_cb, NULL) == ZBADARGUMENTS, "aget(relative path)");
    /* Close: a pending call completes with ZCLOSING. */
    deleted = 0;
    CHECK(zoo_adelete(zh, "/nonexistent-st", -1, void_cb, NULL) == ZOK, "adelete queued before close");
    CHECK(zookeeper_close(zh) == ZOK, "close");
    CHECK(deleted == ZCLOSING || deleted == ZNONODE, "pending call completed at close: %d", deleted);
    printf(failures ? "FAILED %d\n" : "ALL OK\n", failures);
    return failures ? 1 : 0;
}
