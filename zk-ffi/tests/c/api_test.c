/* Behaviour checks of the C API, built against Apache's zookeeper.h and run against a server.
 * Usage: api_test host:port. Prints one line per check; exits non-zero on the first failure. */
#include <zookeeper/zookeeper.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int failures;
#define CHECK(cond, ...) do { if (cond) { printf("ok   "); } else { printf("FAIL "); failures++; } \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int connected, session_path_empty = -1, events_seen, completions_seen;
static char last_event_path[256];
static int last_event_type;
static pthread_t completion_thread;
static int order[16], order_n;

static void global_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)ctx;
    pthread_mutex_lock(&mu);
    if (type == ZOO_SESSION_EVENT) {
        if (state == ZOO_CONNECTED_STATE) connected = 1;
        session_path_empty = path != NULL && path[0] == '\0';
        completion_thread = pthread_self();
    } else {
        events_seen++;
        last_event_type = type;
        snprintf(last_event_path, sizeof last_event_path, "%s", path);
    }
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void wait_for(int *flag, int value) {
    pthread_mutex_lock(&mu);
    while (*flag < value) {
        pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
}

static void ordered_completion(int rc, const struct Stat *stat, const void *data) {
    (void)stat;
    pthread_mutex_lock(&mu);
    if (rc == ZOK && order_n < 16) order[order_n++] = (int)(long)data;
    completions_seen++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static zhandle_t *shared_zh;
static int nested_rc = 1, nested_len = -5;
static void nested_sync_completion(int rc, const char *value, int len, const struct Stat *stat, const void *data) {
    (void)rc; (void)value; (void)len; (void)stat; (void)data;
    char buf[64];
    int blen = sizeof buf;
    /* A sync call from inside a completion must not deadlock. */
    nested_rc = zoo_get(shared_zh, "/t", 0, buf, &blen, NULL);
    nested_len = blen;
    pthread_mutex_lock(&mu);
    completions_seen++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static int closing_rc = 1;
static void closing_completion(int rc, const void *data) {
    (void)data;
    pthread_mutex_lock(&mu);
    closing_rc = rc;
    pthread_mutex_unlock(&mu);
}

static void ignore_stat(int rc, const struct Stat *stat, const void *data) { (void)rc; (void)stat; (void)data; }
static void ignore_string(int rc, const char *value, const void *data) { (void)rc; (void)value; (void)data; }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *host = argv[1];
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);

    errno = 0;
    CHECK(zookeeper_init(NULL, NULL, 1000, 0, 0, 0) == NULL && errno == EINVAL, "init(NULL) -> NULL, EINVAL (errno %d)", errno);

    zhandle_t *zh = zookeeper_init(host, global_watcher, 10000, 0, 0, 0);
    CHECK(zh != NULL, "zookeeper_init");
    shared_zh = zh;
    wait_for(&connected, 1);
    CHECK(zoo_state(zh) == ZOO_CONNECTED_STATE, "state connected");
    CHECK(session_path_empty == 1, "session event path is \"\" not NULL");
    CHECK(zoo_client_id(zh)->client_id != 0, "client id set");
    CHECK(zoo_recv_timeout(zh) > 0, "recv timeout %d", zoo_recv_timeout(zh));

    /* clean slate */
    struct String_vector kids;
    if (zoo_get_children(zh, "/t", 0, &kids) == ZOK) {
        for (int i = 0; i < kids.count; i++) {
            char p[300];
            snprintf(p, sizeof p, "/t/%s", kids.data[i]);
            zoo_delete(zh, p, -1);
        }
        deallocate_String_vector(&kids);
        zoo_delete(zh, "/t", -1);
    }

    char pbuf[8];
    int rc = zoo_create(zh, "/t", "hello world", 11, &ZOO_OPEN_ACL_UNSAFE, 0, pbuf, sizeof pbuf);
    CHECK(rc == ZOK && strcmp(pbuf, "/t") == 0, "create /t rc=%d path=%s", rc, pbuf);
    rc = zoo_create(zh, "/t", "x", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    CHECK(rc == ZNODEEXISTS, "create again -> ZNODEEXISTS (%d)", rc);

    char small[4];
    rc = zoo_create(zh, "/t/seq-", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE, small, sizeof small);
    CHECK(rc == ZOK && strcmp(small, "/t/") == 0, "path_buffer truncated to len-1: '%s'", small);

    char buf[64];
    int blen = 5;
    struct Stat st;
    rc = zoo_get(zh, "/t", 0, buf, &blen, &st);
    CHECK(rc == ZOK && blen == 5 && memcmp(buf, "hello", 5) == 0, "zoo_get truncates to capacity (len %d)", blen);
    CHECK(st.dataLength == 11, "stat.dataLength %d", st.dataLength);
    blen = sizeof buf;
    rc = zoo_get(zh, "/t", 0, buf, &blen, &st);
    CHECK(rc == ZOK && blen == 11, "zoo_get full length %d", blen);
    blen = sizeof buf;
    rc = zoo_get(zh, "/nope", 0, buf, &blen, &st);
    CHECK(rc == ZNONODE, "zoo_get missing -> ZNONODE (%d)", rc);

    rc = zoo_exists(zh, "/t/w", 1, &st);
    CHECK(rc == ZNONODE, "exists with watch on missing node -> ZNONODE");
    rc = zoo_create(zh, "/t/w", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    wait_for(&events_seen, 1);
    CHECK(last_event_type == ZOO_CREATED_EVENT && strcmp(last_event_path, "/t/w") == 0, "created event for /t/w (%d %s)", last_event_type, last_event_path);

    rc = zoo_set(zh, "/t/w", "v", 1, -1);
    CHECK(rc == ZOK, "set");
    rc = zoo_set(zh, "/t/w", "v", 1, 42);
    CHECK(rc == ZBADVERSION, "set bad version -> ZBADVERSION (%d)", rc);

    struct String_vector sv;
    rc = zoo_get_children(zh, "/t", 0, &sv);
    CHECK(rc == ZOK && sv.count == 2, "children count %d", sv.count);
    deallocate_String_vector(&sv);

    struct ACL_vector acl;
    rc = zoo_get_acl(zh, "/t", &acl, &st);
    CHECK(rc == ZOK && acl.count == 1 && acl.data[0].perms == ZOO_PERM_ALL && strcmp(acl.data[0].id.scheme, "world") == 0, "get_acl world:anyone");
    deallocate_ACL_vector(&acl);

    /* multi: one good create, one failing delete */
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    char mbuf[64];
    zoo_create_op_init(&ops[0], "/t/m", "m", 1, &ZOO_OPEN_ACL_UNSAFE, 0, mbuf, sizeof mbuf);
    zoo_delete_op_init(&ops[1], "/t/absent", -1);
    rc = zoo_multi(zh, 2, ops, res);
    CHECK(rc == ZNONODE && res[1].err == ZNONODE, "failed multi -> ZNONODE (%d, %d)", rc, res[1].err);
    CHECK(zoo_exists(zh, "/t/m", 0, NULL) == ZNONODE, "failed multi applied nothing");
    zoo_check_op_init(&ops[1], "/t", 0);
    rc = zoo_multi(zh, 2, ops, res);
    CHECK(rc == ZOK && strcmp(mbuf, "/t/m") == 0 && res[0].err == 0, "multi ok, path %s", mbuf);

    /* async completions run in submission order on one thread */
    completions_seen = 0;
    for (long i = 0; i < 10; i++) {
        zoo_aset(zh, "/t/w", "x", 1, -1, ordered_completion, (void *)i);
    }
    wait_for(&completions_seen, 10);
    int in_order = order_n == 10;
    for (int i = 0; i < order_n; i++) in_order &= order[i] == i;
    CHECK(in_order, "10 async completions in order");

    completions_seen = 0;
    zoo_aget(zh, "/t", 0, nested_sync_completion, NULL);
    wait_for(&completions_seen, 1);
    CHECK(nested_rc == ZOK && nested_len == 11, "sync call inside a completion (rc %d len %d)", nested_rc, nested_len);

    /* bad input */
    CHECK(zoo_create(zh, "bad", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0) == ZBADARGUMENTS, "relative path -> ZBADARGUMENTS");
    CHECK(zoo_create(zh, "/t/", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0) == ZBADARGUMENTS, "trailing slash -> ZBADARGUMENTS");
    CHECK(zoo_get(zh, NULL, 0, buf, &blen, NULL) == ZBADARGUMENTS, "NULL path -> ZBADARGUMENTS");
    CHECK(zoo_delete(NULL, "/t", -1) == ZBADARGUMENTS, "NULL handle -> ZBADARGUMENTS");
    CHECK(zoo_create_ttl(zh, "/t/ttl", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, 100, NULL, 0) == ZBADARGUMENTS, "ttl with non-TTL mode -> ZBADARGUMENTS");
    CHECK(strcmp(zerror(ZNONODE), "no node") == 0, "zerror(ZNONODE)");

    /* chroot */
    char chost[256];
    snprintf(chost, sizeof chost, "%s/t", host);
    zhandle_t *cz = zookeeper_init(chost, NULL, 10000, 0, 0, 0);
    char cpath[64];
    rc = zoo_create(cz, "/inner", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, cpath, sizeof cpath);
    CHECK(rc == ZOK && strcmp(cpath, "/inner") == 0, "chroot create returns stripped path %s", cpath);
    CHECK(zoo_exists(zh, "/t/inner", 0, NULL) == ZOK, "chrooted node is /t/inner");
    zookeeper_close(cz);

    /* close with a call still pending: it completes with ZCLOSING or its real result */
    zoo_aset(zh, "/t/w", "y", 1, -1, ignore_stat, NULL);
    zoo_async(zh, "/t", ignore_string, NULL);
    zoo_adelete(zh, "/t/never-there", -1, closing_completion, NULL);
    rc = zookeeper_close(zh);
    CHECK(rc == ZOK, "zookeeper_close");
    CHECK(closing_rc == ZNONODE || closing_rc == ZCLOSING, "pending call completed at close (%d)", closing_rc);

    printf("%s\n", failures ? "FAILED" : "ALL OK");
    return failures ? 1 : 0;
}
