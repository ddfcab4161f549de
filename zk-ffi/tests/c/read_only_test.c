/* Read-only mode through the C API (mt), against a partitioned ensemble the Rust test controls.
 * Usage: read_only_test host:port,host:port,host:port. Connects with ZOO_READONLY while only the
 * read-only member is up, checks reads and the refused write, prints "READ-ONLY OK" and waits until
 * the library has moved to a read-write server (the test restarts the others), then writes.
 * Prints one line per check; exits non-zero on a failure. */
#include <zookeeper/zookeeper.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int failures;
#define CHECK(cond, ...) do { if (cond) { printf("ok   "); } else { printf("FAIL "); failures++; } \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* Session states the global watcher saw, in order (bounded). */
static int states[64], states_n;

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)path; (void)ctx;
    if (type != ZOO_SESSION_EVENT) return;
    pthread_mutex_lock(&mu);
    if (states_n < (int)(sizeof states / sizeof states[0])) states[states_n++] = state;
    pthread_mutex_unlock(&mu);
    printf("session event, state %d\n", state);
    fflush(stdout);
}

/* Polls zoo_state until it is `want`, for at most `seconds`. */
static int wait_state(zhandle_t *zh, int want, int seconds) {
    for (int i = 0; i < seconds * 10; i++) {
        if (zoo_state(zh) == want) return 1;
        usleep(100 * 1000);
    }
    return 0;
}

/* Whether the watcher saw `first` and, later, `then`, waiting up to 10 s: the library's state
 * changes before the completion thread delivers the event, so zoo_state can be ahead of it. */
static int saw_in_order(int first, int then) {
    for (int tries = 0; tries < 100; tries++) {
        int found = 0;
        pthread_mutex_lock(&mu);
        for (int i = 0; i < states_n; i++) {
            if (found == 0 && states[i] == first) found = 1;
            else if (found == 1 && states[i] == then) found = 2;
        }
        pthread_mutex_unlock(&mu);
        if (found == 2) return 1;
        usleep(100 * 1000);
    }
    return 0;
}

/* The state of the watcher's first session event (waiting up to 10 s for it); 0 if none. */
static int first_state(void) {
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&mu);
        int s = states_n > 0 ? states[0] : 0;
        pthread_mutex_unlock(&mu);
        if (s) return s;
        usleep(100 * 1000);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    zhandle_t *zh = zookeeper_init(argv[1], watcher, 10000, 0, 0, ZOO_READONLY);
    CHECK(zh != NULL, "zookeeper_init with ZOO_READONLY");
    if (!zh) return 1;
    CHECK(wait_state(zh, ZOO_READONLY_STATE, 60), "zoo_state is ZOO_READONLY_STATE (%d)", zoo_state(zh));
    CHECK(first_state() == ZOO_READONLY_STATE, "the watcher's first session event is ZOO_READONLY_STATE");
    int64_t ro_session = zoo_client_id(zh)->client_id;
    char buf[32];
    int len = sizeof buf;
    int rc = zoo_get(zh, "/ro", 0, buf, &len, NULL);
    CHECK(rc == ZOK && len == 6 && memcmp(buf, "before", 6) == 0, "read from the read-only server (rc %d)", rc);
    rc = zoo_create(zh, "/ro/c", "x", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    CHECK(rc == ZNOTREADONLY, "create refused with ZNOTREADONLY (rc %d)", rc);
    rc = zoo_set(zh, "/ro", "x", 1, -1);
    CHECK(rc == ZNOTREADONLY, "set refused with ZNOTREADONLY (rc %d)", rc);
    if (failures) return 1;
    printf("READ-ONLY OK\n");
    fflush(stdout);

    CHECK(wait_state(zh, ZOO_CONNECTED_STATE, 150), "zoo_state is ZOO_CONNECTED_STATE (%d)", zoo_state(zh));
    CHECK(saw_in_order(ZOO_CONNECTING_STATE, ZOO_CONNECTED_STATE),
          "the watcher got ZOO_CONNECTING_STATE, then ZOO_CONNECTED_STATE");
    CHECK(zoo_client_id(zh)->client_id != ro_session, "a new session from the read-write server");
    rc = zoo_create(zh, "/ro/c", "after", 5, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    CHECK(rc == ZOK, "create on the read-write server (rc %d)", rc);
    zookeeper_close(zh);
    if (failures) return 1;
    printf("ALL OK\n");
    return 0;
}
