/* Null data, zoo_set_servers, single-watcher removal (checkWatches), deterministic connection
 * order, and bad input. Built against Apache's zookeeper.h; the same binary runs on Debian's
 * libzookeeper_mt and on libzkrs, and must print the same verdicts on both.
 * Usage: gaps_test host:port [zkrs]   ("zkrs" adds checks where Apache's library would crash). */
#include <zookeeper/zookeeper.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int failures;
#define CHECK(cond, ...) do { if (cond) { printf("ok   "); } else { printf("FAIL "); failures++; } \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int connects;

static void global_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)path; (void)ctx;
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) {
        pthread_mutex_lock(&mu);
        connects++;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
}

static int wait_count(int *counter, int value, int ms) {
    int ok;
    pthread_mutex_lock(&mu);
    for (int waited = 0; *counter < value && waited < ms; waited += 10) {
        pthread_mutex_unlock(&mu);
        usleep(10000);
        pthread_mutex_lock(&mu);
    }
    ok = *counter >= value;
    pthread_mutex_unlock(&mu);
    return ok;
}

static int data_done, data_rc = 99, data_len = 99;
static const char *data_ptr = (const char *)1;
static void data_cb(int rc, const char *value, int len, const struct Stat *stat, const void *d) {
    (void)stat; (void)d;
    pthread_mutex_lock(&mu);
    data_rc = rc; data_len = len; data_ptr = value; data_done++;
    pthread_mutex_unlock(&mu);
}

static int fired_a, fired_b;
static void watcher_x(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)state; (void)path;
    if (type != ZOO_CHANGED_EVENT) return;
    pthread_mutex_lock(&mu);
    if (*(char *)ctx == 'a') fired_a++; else fired_b++;
    pthread_mutex_unlock(&mu);
}

static int void_done, void_rc = 99;
static void void_cb(int rc, const void *d) {
    (void)d;
    pthread_mutex_lock(&mu);
    void_rc = rc; void_done++;
    pthread_mutex_unlock(&mu);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *host = argv[1];
    int zkrs = argc > 2 && strcmp(argv[2], "zkrs") == 0;
    char buf[64], path[64];
    int blen, rc;
    struct Stat st;
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);

    zhandle_t *zh = zookeeper_init(host, global_watcher, 10000, 0, 0, 0);
    CHECK(zh && wait_count(&connects, 1, 10000), "connected");
    snprintf(path, sizeof path, "/gaps%d", (int)getpid());
    rc = zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    CHECK(rc == ZOK, "create with NULL/-1 data: %d", rc);

    /* Null data reads back as length -1; empty data as 0. */
    blen = sizeof buf;
    rc = zoo_get(zh, path, 0, buf, &blen, &st);
    CHECK(rc == ZOK && blen == -1 && st.dataLength == 0, "zoo_get null data: rc %d buffer_len %d", rc, blen);
    rc = zoo_aget(zh, path, 0, data_cb, NULL);
    CHECK(rc == ZOK && wait_count(&data_done, 1, 5000) && data_rc == 0 && data_ptr == NULL && data_len == -1,
          "aget null data: value %p len %d", (void *)data_ptr, data_len);
    rc = zoo_set(zh, path, "", 0, -1);
    blen = sizeof buf;
    rc = rc ? rc : zoo_get(zh, path, 0, buf, &blen, NULL);
    CHECK(rc == ZOK && blen == 0, "empty data: buffer_len %d", blen);
    rc = zoo_aget(zh, path, 0, data_cb, NULL);
    CHECK(rc == ZOK && wait_count(&data_done, 2, 5000) && data_rc == 0 && data_len == 0,
          "aget empty data: len %d", data_len);
    rc = zoo_set(zh, path, NULL, -1, -1);
    blen = sizeof buf;
    rc = rc ? rc : zoo_get(zh, path, 0, buf, &blen, NULL);
    CHECK(rc == ZOK && blen == -1, "set NULL/-1 then get: buffer_len %d", blen);
    rc = zoo_set(zh, path, "abcdef", 6, -1);
    blen = 3;
    rc = rc ? rc : zoo_get(zh, path, 0, buf, &blen, NULL);
    CHECK(rc == ZOK && blen == 3 && memcmp(buf, "abc", 3) == 0, "truncating get: buffer_len %d", blen);

    /* Multi with null data. */
    {
        zoo_op_t ops[2];
        zoo_op_result_t res[2];
        char child[80], made[80];
        snprintf(child, sizeof child, "%s/m", path);
        zoo_create_op_init(&ops[0], child, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, made, sizeof made);
        zoo_set_op_init(&ops[1], path, NULL, -1, -1, NULL);
        rc = zoo_multi(zh, 2, ops, res);
        blen = sizeof buf;
        int rc2 = zoo_get(zh, child, 0, buf, &blen, NULL);
        int blen2 = sizeof buf;
        int rc3 = zoo_get(zh, path, 0, buf, &blen2, NULL);
        CHECK(rc == ZOK && rc2 == ZOK && blen == -1 && rc3 == ZOK && blen2 == -1,
              "multi create/set with null data: %d %d %d %d", rc, blen, rc3, blen2);
        zoo_delete(zh, child, -1);
    }

    /* Single-watcher removal: only that (function, context) goes; the server is asked. */
    {
        static char ca = 'a', cb = 'b';
        rc = zoo_wget(zh, path, watcher_x, &ca, buf, &(int){sizeof buf}, NULL);
        rc = rc ? rc : zoo_wget(zh, path, watcher_x, &cb, buf, &(int){sizeof buf}, NULL);
        CHECK(rc == ZOK, "two data watchers");
        rc = zoo_remove_watches(zh, path, ZWATCHTYPE_DATA, watcher_x, &ca, 0);
        CHECK(rc == ZOK, "remove one watcher: %d", rc);
        rc = zoo_remove_watches(zh, path, ZWATCHTYPE_DATA, watcher_x, &ca, 0);
        CHECK(rc == ZNOWATCHER, "remove it again -> ZNOWATCHER: %d", rc);
        rc = zoo_remove_watches(zh, path, ZWATCHTYPE_CHILD, watcher_x, &cb, 0);
        CHECK(rc == ZNOWATCHER, "wrong type -> ZNOWATCHER: %d", rc);
        zoo_set(zh, path, "x", 1, -1);
        wait_count(&fired_b, 1, 5000);
        usleep(200000);
        CHECK(fired_a == 0 && fired_b == 1, "only the kept watcher fired (a %d, b %d)", fired_a, fired_b);
        /* Async form, local removal. */
        rc = zoo_wget(zh, path, watcher_x, &ca, buf, &(int){sizeof buf}, NULL);
        rc = rc ? rc : zoo_aremove_watches(zh, path, ZWATCHTYPE_ANY, watcher_x, &ca, 0, (void_completion_t *)void_cb, NULL);
        CHECK(rc == ZOK && wait_count(&void_done, 1, 5000) && void_rc == ZOK, "aremove_watches: %d %d", rc, void_rc);
        rc = zoo_wget(zh, path, watcher_x, &cb, buf, &(int){sizeof buf}, NULL);
        rc = rc ? rc : zoo_remove_watches(zh, path, ZWATCHTYPE_DATA, watcher_x, &cb, 1);
        CHECK(rc == ZOK, "local removal: %d", rc);
        zoo_set(zh, path, "y", 1, -1);
        usleep(300000);
        CHECK(fired_a == 0 && fired_b == 1, "removed watchers stay quiet (a %d, b %d)", fired_a, fired_b);
    }

    /* Server list changes. */
    {
        const char *colon = strrchr(host, ':');
        char other[128];
        snprintf(other, sizeof other, "localhost%s", colon ? colon : ":2181");
        CHECK(zoo_set_servers(zh, NULL) == ZBADARGUMENTS, "set_servers(NULL) -> ZBADARGUMENTS");
        rc = zoo_set_servers(zh, host);
        CHECK(rc == ZOK, "set_servers(same list): %d", rc);
        int before = connects;
        rc = zoo_set_servers(zh, other);
        CHECK(rc == ZOK, "set_servers(%s): %d", other, rc);
        /* The session moves: a reconnect (the next call may see the drop). */
        for (int i = 0; i < (zkrs ? 100 : 4) && connects <= before; i++) {
            blen = sizeof buf;
            zoo_get(zh, path, 0, buf, &blen, NULL);
            usleep(50000);
        }
        blen = sizeof buf;
        rc = zoo_get(zh, path, 0, buf, &blen, NULL);
        const char *cur = zoo_get_current_server(zh);
        /* Apache's library compares resolved addresses (localhost is 127.0.0.1: it stays);
         * libzkrs compares the names given, so it moves. */
        CHECK(rc == ZOK && (!zkrs || (connects > before && cur && strncmp(cur, "localhost", 9) == 0)),
              "after set_servers (%d connects, current %s, rc %d)", connects, cur ? cur : "(null)", rc);
    }

    /* Bad input returns Apache's codes. */
    blen = sizeof buf;
    CHECK(zoo_aget(zh, "", 0, data_cb, NULL) == ZBADARGUMENTS, "aget(\"\")");
    CHECK(zoo_aget(zh, "/a//b", 0, data_cb, NULL) == ZBADARGUMENTS, "aget(/a//b)");
    CHECK(zoo_aget(zh, "/a/./b", 0, data_cb, NULL) == ZBADARGUMENTS, "aget(/a/./b)");
    CHECK(zoo_exists(zh, "no-slash", 0, NULL) == ZBADARGUMENTS, "exists(relative)");
    CHECK(zoo_aset(zh, NULL, "x", 1, -1, NULL, NULL) == ZBADARGUMENTS, "aset(NULL path)");
    rc = zoo_remove_watches(zh, path, 9, watcher_x, NULL, 0);
    CHECK(rc == ZNOWATCHER, "remove_watches(bad type) -> ZNOWATCHER: %d", rc);
    rc = zoo_remove_all_watches(zh, path, 0, 0);
    CHECK(rc == ZNOWATCHER, "remove_all_watches(type 0) -> ZNOWATCHER: %d", rc);
    CHECK(zoo_remove_watches(NULL, path, 1, watcher_x, NULL, 0) == ZBADARGUMENTS, "remove_watches(NULL handle)");
    CHECK(zoo_remove_all_watches(zh, path, ZWATCHTYPE_ANY, 0) == ZNOWATCHER, "remove_all_watches(none)");
    CHECK(zoo_add_auth(zh, NULL, "x", 1, NULL, NULL) == ZBADARGUMENTS, "add_auth(NULL scheme)");
    CHECK(zoo_add_auth(NULL, "digest", "x", 1, NULL, NULL) == ZBADARGUMENTS, "add_auth(NULL handle)");
    CHECK(zoo_state(NULL) == 0, "state(NULL) == 0");
    CHECK(zoo_create(zh, path, "x", 1, NULL, 0, NULL, 0) == ZINVALIDACL, "create(NULL acl) -> ZINVALIDACL");
    {
        struct ACL_vector empty = {0, NULL};
        rc = zoo_set_acl(zh, path, -1, &empty);
        CHECK(rc == ZINVALIDACL, "set_acl(empty) -> ZINVALIDACL: %d", rc);
    }
    if (zkrs) {
        /* Apache's library reads through these pointers and crashes; ours refuses them. */
        CHECK(zoo_create(zh, "/x", NULL, 5, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0) == ZBADARGUMENTS, "create(NULL, 5)");
        CHECK(zoo_get(zh, path, 0, buf, NULL, NULL) == ZBADARGUMENTS, "get(NULL buffer_len)");
        blen = sizeof buf;
        CHECK(zoo_get(NULL, path, 0, buf, &blen, NULL) == ZBADARGUMENTS, "get(NULL handle)");
        CHECK(zoo_amulti(zh, -1, NULL, NULL, NULL, NULL) == ZBADARGUMENTS, "amulti(-1)");
        CHECK(zoo_set_servers(NULL, host) == ZBADARGUMENTS, "set_servers(NULL handle) -> ZBADARGUMENTS");
        CHECK(zoo_get_children(zh, path, 0, NULL) == ZBADARGUMENTS, "get_children(NULL out)");
        CHECK(zoo_recv_timeout(NULL) == 0, "recv_timeout(NULL) == 0: %d", zoo_recv_timeout(NULL));
        CHECK(zoo_client_id(NULL) == NULL, "client_id(NULL) == NULL");
        CHECK(zoo_get_context(NULL) == NULL, "get_context(NULL) == NULL");
        CHECK(is_unrecoverable(NULL) == ZOK, "is_unrecoverable(NULL) == ZOK: %d", is_unrecoverable(NULL));
        CHECK(zookeeper_close(NULL) == ZBADARGUMENTS, "close(NULL)");
        blen = -7;
        rc = zoo_get(zh, path, 0, buf, &blen, NULL);
        CHECK(rc == ZOK && blen == 0, "get with negative capacity copies nothing: %d %d", rc, blen);
    }
    zoo_delete(zh, path, -1);
    zookeeper_close(zh);

    /* zoo_deterministic_conn_order: hosts are tried in the order given. */
    {
        const char *colon = strrchr(host, ':');
        char two[160];
        snprintf(two, sizeof two, "127.0.0.1%s,localhost%s", colon, colon);
        zoo_deterministic_conn_order(1);
        int first = 0;
        for (int i = 0; i < 6; i++) {
            connects = 0;
            zhandle_t *d = zookeeper_init(two, global_watcher, 10000, 0, 0, 0);
            if (d && wait_count(&connects, 1, 10000)) {
                const char *cur = zoo_get_current_server(d);
                if (cur && strncmp(cur, "127.0.0.1", 9) == 0) first++;
            }
            if (d) zookeeper_close(d);
        }
        zoo_deterministic_conn_order(0);
        CHECK(first == 6, "deterministic order: first host every time (%d/6)", first);
    }

    printf(failures ? "FAILED %d\n" : "ALL OK\n", failures);
    return failures ? 1 : 0;
}
