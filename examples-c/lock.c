/* A distributed lock (exclusive): each contender creates an ephemeral sequential node under the
 * lock node and holds the lock while its node is the lowest; others watch only their immediate
 * predecessor, so a release wakes one waiter (no herd).
 *   lock HOSTS LOCKPATH HOLD_MS LABEL  -> "LABEL acquired", holds HOLD_MS, "LABEL released" */
#include "common.h"

/* Suffix order = creation order for nodes of the same prefix. */
static int seq_of(const char *name) {
    const char *dash = strrchr(name, '-');
    return dash ? atoi(dash + 1) : -1;
}

static int by_seq(const void *a, const void *b) {
    return seq_of(*(char *const *)a) - seq_of(*(char *const *)b);
}

/* Blocks until `mine` (a child name of dir) is the lowest; returns when it is. */
static void wait_turn(zhandle_t *zh, const char *dir, const char *mine) {
    for (;;) {
        struct String_vector kids;
        int rc = zoo_get_children(zh, dir, 0, &kids);
        if (rc != ZOK) ex_die(dir, rc);
        qsort(kids.data, kids.count, sizeof(char *), by_seq);
        int me = -1;
        for (int i = 0; i < kids.count; i++)
            if (strcmp(kids.data[i], mine) == 0) me = i;
        if (me < 0) ex_die("own node vanished", ZNONODE);
        if (me == 0) {
            deallocate_String_vector(&kids);
            return;
        }
        char prev[512];
        snprintf(prev, sizeof prev, "%s/%s", dir, kids.data[me - 1]);
        deallocate_String_vector(&kids);
        int seen = ex_seen();
        rc = zoo_wexists(zh, prev, ex_watcher, NULL, NULL);
        if (rc == ZOK) ex_wait_event(seen);
        else if (rc != ZNONODE) ex_die(prev, rc);
    }
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: lock HOSTS LOCKPATH HOLD_MS LABEL\n");
        return 2;
    }
    zhandle_t *zh = ex_connect(argv[1]);
    const char *dir = argv[2];
    ex_ensure(zh, dir);
    char prefix[512], made[512];
    snprintf(prefix, sizeof prefix, "%s/lock-", dir);
    int rc = zoo_create(zh, prefix, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, made, sizeof made);
    if (rc != ZOK) ex_die(prefix, rc);
    wait_turn(zh, dir, strrchr(made, '/') + 1);
    printf("%s acquired\n", argv[4]);
    fflush(stdout);
    ex_sleep_ms(atoi(argv[3]));
    printf("%s released\n", argv[4]);
    fflush(stdout);
    rc = zoo_delete(zh, made, -1);
    if (rc != ZOK) ex_die(made, rc);
    zookeeper_close(zh);
    return 0;
}
