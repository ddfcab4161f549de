/* Leader election: candidates stand with ephemeral sequential nodes; the lowest leads. Each
 * candidate watches only its predecessor and re-checks when it goes, so when a leader leaves (or
 * its session dies) exactly the next one takes over. The leader writes its name into the
 * election node, where followers and tools can read who leads.
 *   leader HOSTS ELECTION NAME LEAD_MS -> "NAME standing", "NAME is leader", "NAME steps down" */
#include "common.h"

static int seq_of(const char *name) {
    const char *dash = strrchr(name, '-');
    return dash ? atoi(dash + 1) : -1;
}

static int by_seq(const void *a, const void *b) {
    return seq_of(*(char *const *)a) - seq_of(*(char *const *)b);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: leader HOSTS ELECTION NAME LEAD_MS\n");
        return 2;
    }
    zhandle_t *zh = ex_connect(argv[1]);
    const char *dir = argv[2], *name = argv[3];
    ex_ensure(zh, dir);
    char prefix[512], made[512];
    snprintf(prefix, sizeof prefix, "%s/n-", dir);
    int rc = zoo_create(zh, prefix, name, (int)strlen(name), &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                        made, sizeof made);
    if (rc != ZOK) ex_die(prefix, rc);
    printf("%s standing as %s\n", name, made);
    fflush(stdout);
    const char *mine = strrchr(made, '/') + 1;
    for (;;) {
        struct String_vector kids;
        rc = zoo_get_children(zh, dir, 0, &kids);
        if (rc != ZOK) ex_die(dir, rc);
        qsort(kids.data, kids.count, sizeof(char *), by_seq);
        int me = -1;
        for (int i = 0; i < kids.count; i++)
            if (strcmp(kids.data[i], mine) == 0) me = i;
        if (me == 0) {
            deallocate_String_vector(&kids);
            break;
        }
        if (me < 0) ex_die("candidate node vanished", ZNONODE);
        char prev[512];
        snprintf(prev, sizeof prev, "%s/%s", dir, kids.data[me - 1]);
        deallocate_String_vector(&kids);
        int seen = ex_seen();
        rc = zoo_wexists(zh, prev, ex_watcher, NULL, NULL);
        if (rc == ZOK) ex_wait_event(seen);
        else if (rc != ZNONODE) ex_die(prev, rc);
    }
    rc = zoo_set(zh, dir, name, (int)strlen(name), -1);
    if (rc != ZOK) ex_die(dir, rc);
    printf("%s is leader\n", name);
    fflush(stdout);
    ex_sleep_ms(atoi(argv[4]));
    printf("%s steps down\n", name);
    fflush(stdout);
    zoo_delete(zh, made, -1);
    zookeeper_close(zh);
    return 0;
}
