/* Unique, increasing IDs from sequential znodes: each ID is the sequence number ZooKeeper gives a
 * persistent sequential child of PATH (the node is then deleted; the counter lives in the
 * parent's cversion, so numbers are never reused).
 *   seqid HOSTS PATH N  -> N lines "id NUMBER" */
#include "common.h"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: seqid HOSTS PATH N\n");
        return 2;
    }
    zhandle_t *zh = ex_connect(argv[1]);
    const char *dir = argv[2];
    ex_ensure(zh, dir);
    char prefix[512], made[512];
    snprintf(prefix, sizeof prefix, "%s/id-", dir);
    int n = atoi(argv[3]);
    for (int i = 0; i < n; i++) {
        int rc = zoo_create(zh, prefix, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_SEQUENTIAL, made, sizeof made);
        if (rc != ZOK) ex_die(prefix, rc);
        printf("id %ld\n", strtol(strrchr(made, '-') + 1, NULL, 10));
        rc = zoo_delete(zh, made, -1);
        if (rc != ZOK) ex_die(made, rc);
    }
    zookeeper_close(zh);
    return 0;
}
