/* libzkrs's additions declared by the generated zkrs_ext.h, called from C against a server:
 * persistent and persistent-recursive watches (zoo_add_watch, zoo_aadd_watch) and their removal,
 * zoo_get_ephemerals / zoo_aget_ephemerals, zoo_get_all_children_number and zoo_whoami.
 * Usage: ext_test host:port. One line per check; "ALL OK" at the end when every check passed. */
#include <zookeeper/zkrs_ext.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int failures;
#define CHECK(cond, ...) do { if (cond) { printf("ok   "); } else { printf("FAIL "); failures++; } \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int connected, async_done, async_rc = 1, async_count = -1;

/* The events a watcher saw, as "type path" lines. */
struct seen {
    int count;
    char lines[16][96];
};
static struct seen recursive, persistent;

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)path; (void)ctx;
    pthread_mutex_lock(&mu);
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) connected = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void recording_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)state;
    struct seen *s = ctx;
    pthread_mutex_lock(&mu);
    if (s->count < 16) snprintf(s->lines[s->count], sizeof s->lines[0], "%d %s", type, path);
    s->count++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void void_done(int rc, const void *data) {
    (void)data;
    pthread_mutex_lock(&mu);
    async_rc = rc;
    async_done = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void strings_done(int rc, const struct String_vector *v, const void *data) {
    (void)data;
    pthread_mutex_lock(&mu);
    async_rc = rc;
    async_count = rc == ZOK ? v->count : -1;
    async_done = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* Waits up to 10 s for *value to reach at least want; returns what it is then. */
static int wait_at_least(int *value, int want) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&mu);
    while (*value < want && pthread_cond_timedwait(&cv, &mu, &until) == 0) {}
    int v = *value;
    pthread_mutex_unlock(&mu);
    return v;
}

static int saw(struct seen *s, int type, const char *path) {
    char line[96];
    snprintf(line, sizeof line, "%d %s", type, path);
    pthread_mutex_lock(&mu);
    int found = 0;
    for (int i = 0; i < s->count && i < 16; i++) found |= !strcmp(s->lines[i], line);
    pthread_mutex_unlock(&mu);
    return found;
}

static int create(zhandle_t *zh, const char *path, int mode) {
    return zoo_create(zh, path, "x", 1, &ZOO_OPEN_ACL_UNSAFE, mode, NULL, 0);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    zhandle_t *zh = zookeeper_init(argv[1], session_watcher, 10000, NULL, NULL, 0);
    CHECK(zh != NULL, "zookeeper_init");
    if (!zh) return 1;
    wait_at_least(&connected, 1);

    /* A persistent-recursive watch sees every node below it, and stays. */
    CHECK(create(zh, "/ext", 0) == ZOK, "create /ext");
    int rc = zoo_add_watch(zh, "/ext", ZOO_ADD_WATCH_PERSISTENT_RECURSIVE, recording_watcher, &recursive);
    CHECK(rc == ZOK, "zoo_add_watch recursive: %d", rc);
    CHECK(create(zh, "/ext/a", 0) == ZOK && create(zh, "/ext/a/b", 0) == ZOK, "create /ext/a, /ext/a/b");
    CHECK(zoo_set(zh, "/ext/a", "y", 1, -1) == ZOK, "set /ext/a");
    CHECK(wait_at_least(&recursive.count, 3) == 3, "recursive watch: 3 events, got %d", recursive.count);
    CHECK(saw(&recursive, ZOO_CREATED_EVENT, "/ext/a") && saw(&recursive, ZOO_CREATED_EVENT, "/ext/a/b") &&
              saw(&recursive, ZOO_CHANGED_EVENT, "/ext/a"),
          "recursive watch: created /ext/a and /ext/a/b, changed /ext/a");

    /* A persistent watch (asynchronous call) sees its node's children change, again and again. */
    CHECK(create(zh, "/ext/p", 0) == ZOK, "create /ext/p");
    rc = zoo_aadd_watch(zh, "/ext/p", ZOO_ADD_WATCH_PERSISTENT, recording_watcher, &persistent, void_done, NULL);
    CHECK(rc == ZOK, "zoo_aadd_watch submitted: %d", rc);
    wait_at_least(&async_done, 1);
    CHECK(async_rc == ZOK, "zoo_aadd_watch completion: %d", async_rc);
    CHECK(create(zh, "/ext/p/1", 0) == ZOK && create(zh, "/ext/p/2", 0) == ZOK, "create two children of /ext/p");
    CHECK(wait_at_least(&persistent.count, 2) == 2 && saw(&persistent, ZOO_CHILD_EVENT, "/ext/p"),
          "persistent watch: two child events, got %d", persistent.count);

    /* Bad arguments are refused by the call itself. */
    CHECK(zoo_add_watch(zh, "/ext", 7, recording_watcher, NULL) == ZBADARGUMENTS, "unknown mode refused");
    CHECK(zoo_add_watch(zh, "/ext", ZOO_ADD_WATCH_PERSISTENT, NULL, NULL) == ZBADARGUMENTS, "NULL watcher refused");
    CHECK(zoo_add_watch(zh, "ext", ZOO_ADD_WATCH_PERSISTENT, recording_watcher, NULL) == ZBADARGUMENTS,
          "relative path refused");

    /* Removed, the recursive watch sees nothing more. */
    rc = zoo_remove_all_watches(zh, "/ext", ZWATCHTYPE_ANY, 0);
    CHECK(rc == ZOK, "zoo_remove_all_watches /ext: %d", rc);
    int before = recursive.count;
    CHECK(create(zh, "/ext/after", 0) == ZOK, "create /ext/after");
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    CHECK(recursive.count == before, "no event after removal: %d then %d", before, recursive.count);

    /* Every node below /ext: a, a/b, p, p/1, p/2, after. */
    int count = -1;
    rc = zoo_get_all_children_number(zh, "/ext", &count);
    CHECK(rc == ZOK && count == 6, "zoo_get_all_children_number /ext: rc %d count %d", rc, count);
    CHECK(zoo_get_all_children_number(zh, "/ext/none", &count) == ZNONODE, "getAllChildrenNumber of a missing node");

    /* This session's ephemerals, by prefix. */
    CHECK(create(zh, "/ext/e1", ZOO_EPHEMERAL) == ZOK && create(zh, "/ext/a/e2", ZOO_EPHEMERAL) == ZOK,
          "create two ephemerals");
    struct String_vector eph = {0, NULL};
    rc = zoo_get_ephemerals(zh, "/ext", &eph);
    CHECK(rc == ZOK && eph.count == 2, "zoo_get_ephemerals /ext: rc %d count %d", rc, eph.count);
    deallocate_String_vector(&eph);
    rc = zoo_get_ephemerals(zh, "/ext/a", &eph);
    CHECK(rc == ZOK && eph.count == 1 && !strcmp(eph.data[0], "/ext/a/e2"), "zoo_get_ephemerals /ext/a: rc %d count %d",
          rc, eph.count);
    deallocate_String_vector(&eph);
    async_done = 0;
    rc = zoo_aget_ephemerals(zh, "/", strings_done, NULL);
    CHECK(rc == ZOK, "zoo_aget_ephemerals submitted: %d", rc);
    wait_at_least(&async_done, 1);
    CHECK(async_rc == ZOK && async_count == 2, "zoo_aget_ephemerals /: rc %d count %d", async_rc, async_count);

    /* Who the server takes this session for: its address, by the ip scheme. */
    struct ClientInfo_vector who = {0, NULL};
    rc = zoo_whoami(zh, &who);
    CHECK(rc == ZOK && who.count >= 1 && !strcmp(who.data[0].authScheme, "ip"), "zoo_whoami: rc %d count %d", rc,
          who.count);
    deallocate_ClientInfo_vector(&who);

    zookeeper_close(zh);
    printf(failures ? "%d FAILED\n" : "ALL OK\n", failures);
    return failures != 0;
}
