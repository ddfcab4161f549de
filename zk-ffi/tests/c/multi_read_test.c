/* multiRead through libzkrs's additions (zoo_amulti_read, zoo_multi_read and the two op helpers),
 * built against include/ and run against a server. Usage: multi_read_test host:port.
 * Prints one line per check; "ALL OK" at the end when every check passed. */
#include <zookeeper/zkrs_ext.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...) do { if (cond) { printf("ok   "); } else { printf("FAIL "); failures++; } \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int connected, multi_done, multi_rc = 1;

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)path; (void)ctx;
    pthread_mutex_lock(&mu);
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) connected = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void multi_completion(int rc, const void *data) {
    pthread_mutex_lock(&mu);
    multi_rc = rc;
    multi_done = data == (const void *)&multi_done;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void wait_for(int *flag) {
    pthread_mutex_lock(&mu);
    while (!*flag) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

/* 1 when v holds exactly the names a and b, in any order. */
static int holds_a_b(const struct String_vector *v) {
    if (v->count != 2) return 0;
    return (!strcmp(v->data[0], "a") && !strcmp(v->data[1], "b")) ||
           (!strcmp(v->data[0], "b") && !strcmp(v->data[1], "a"));
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    zhandle_t *zh = zookeeper_init(argv[1], watcher, 10000, NULL, NULL, 0);
    CHECK(zh != NULL, "zookeeper_init");
    if (!zh) return 1;
    wait_for(&connected);

    CHECK(zoo_create(zh, "/mr", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0) == ZOK, "create /mr");
    CHECK(zoo_create(zh, "/mr/a", "alpha", 5, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0) == ZOK, "create /mr/a");
    CHECK(zoo_create(zh, "/mr/b", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0) == ZOK, "create /mr/b");

    /* Async: two existing nodes and a missing one, each answered on its own. */
    zoo_op_t ops[3];
    zoo_op_result_t res[3];
    char buf[64], missing_buf[16];
    struct Stat st, missing_st;
    struct String_vector kids = {99, NULL};
    memset(buf, 0, sizeof buf);
    memset(&st, 0, sizeof st);
    zoo_get_data_op_init(&ops[0], "/mr/a", buf, sizeof buf, &st);
    zoo_get_children_op_init(&ops[1], "/mr", &kids);
    zoo_get_data_op_init(&ops[2], "/mr/missing", missing_buf, sizeof missing_buf, &missing_st);
    int rc = zoo_amulti_read(zh, 3, ops, res, multi_completion, &multi_done);
    CHECK(rc == ZOK, "zoo_amulti_read submitted: %d", rc);
    wait_for(&multi_done);
    CHECK(multi_rc == ZOK, "async multiRead rc ZOK: %d", multi_rc);
    CHECK(res[0].err == ZOK && res[0].valuelen == 5 && res[0].value == buf && !memcmp(buf, "alpha", 5),
          "getData /mr/a: err %d len %d", res[0].err, res[0].valuelen);
    CHECK(res[0].stat == &st && st.dataLength == 5 && st.version == 0 && st.czxid != 0,
          "getData /mr/a stat: dataLength %d", st.dataLength);
    CHECK(res[1].err == ZOK && holds_a_b(&kids), "getChildren /mr: err %d count %d", res[1].err, kids.count);
    CHECK(res[2].err == ZNONODE, "getData /mr/missing: err %d (%s)", res[2].err, zerror(res[2].err));
    deallocate_String_vector(&kids);
    CHECK(kids.data == NULL, "deallocate_String_vector freed the children");

    /* Sync: a missing node's children (empty vector), null data, a leaf's empty children. */
    struct String_vector none = {99, NULL}, leaf = {99, NULL};
    zoo_get_children_op_init(&ops[0], "/mr/missing", &none);
    zoo_get_data_op_init(&ops[1], "/mr/b", buf, sizeof buf, NULL);
    zoo_get_children_op_init(&ops[2], "/mr/a", &leaf);
    rc = zoo_multi_read(zh, 3, ops, res);
    CHECK(rc == ZOK, "zoo_multi_read rc ZOK: %d", rc);
    CHECK(res[0].err == ZNONODE && none.count == 0 && none.data == NULL,
          "getChildren /mr/missing: err %d, vector emptied", res[0].err);
    CHECK(res[1].err == ZOK && res[1].valuelen == -1 && res[1].stat == NULL,
          "getData /mr/b null data: err %d len %d", res[1].err, res[1].valuelen);
    CHECK(res[2].err == ZOK && leaf.count == 0, "getChildren /mr/a: err %d count %d", res[2].err, leaf.count);
    deallocate_String_vector(&none);
    deallocate_String_vector(&leaf);

    /* Truncation, as zoo_get does it. */
    char small[3];
    zoo_get_data_op_init(&ops[0], "/mr/a", small, sizeof small, NULL);
    rc = zoo_multi_read(zh, 1, ops, res);
    CHECK(rc == ZOK && res[0].err == ZOK && res[0].valuelen == 3 && !memcmp(small, "alp", 3),
          "getData into a 3-byte buffer: rc %d len %d", rc, res[0].valuelen);

    /* Bad input is refused by the call itself. */
    zoo_op_t bad[2];
    zoo_get_data_op_init(&bad[0], "/mr/a", buf, sizeof buf, NULL);
    zoo_delete_op_init(&bad[1], "/mr/a", -1);
    CHECK(zoo_multi_read(zh, 2, bad, res) == ZBADARGUMENTS, "a delete op in multiRead: ZBADARGUMENTS");
    CHECK(zoo_amulti_read(zh, 2, bad, res, multi_completion, NULL) == ZBADARGUMENTS,
          "a delete op in async multiRead: ZBADARGUMENTS");
    zoo_get_data_op_init(&bad[0], "no-slash", buf, sizeof buf, NULL);
    CHECK(zoo_multi_read(zh, 1, bad, res) == ZBADARGUMENTS, "a bad path: ZBADARGUMENTS");
    CHECK(zoo_multi_read(zh, -1, bad, res) == ZBADARGUMENTS, "a negative count: ZBADARGUMENTS");
    CHECK(zoo_multi_read(zh, 1, bad, NULL) == ZBADARGUMENTS, "NULL results: ZBADARGUMENTS");
    CHECK(zoo_multi_read(NULL, 1, ops, res) == ZBADARGUMENTS, "NULL handle: ZBADARGUMENTS");
    zoo_get_data_op_init(&bad[0], "/mr/a", buf, sizeof buf, NULL);
    CHECK(zoo_multi(zh, 1, bad, res) == ZUNIMPLEMENTED, "a read op in zoo_multi: ZUNIMPLEMENTED");
    CHECK(zoo_multi_read(zh, 0, NULL, NULL) == ZOK, "an empty multiRead: ZOK");

    CHECK(zoo_delete(zh, "/mr/a", -1) == ZOK && zoo_delete(zh, "/mr/b", -1) == ZOK &&
          zoo_delete(zh, "/mr", -1) == ZOK, "cleanup");
    zookeeper_close(zh);
    if (failures) {
        printf("%d FAILED\n", failures);
        return 1;
    }
    printf("ALL OK\n");
    return 0;
}
