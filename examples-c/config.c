/* Configuration kept in one znode.
 *   config HOSTS set PATH VALUE   -> writes VALUE (creating the node), "set PATH = VALUE"
 *   config HOSTS watch PATH N     -> prints "PATH = VALUE" now and after every change, N lines
 * The watcher re-reads with a new watch each time, so no update after the first read is missed
 * for good: at worst several quick updates show as their last value. */
#include "common.h"

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: config HOSTS set PATH VALUE | config HOSTS watch PATH N\n");
        return 2;
    }
    zhandle_t *zh = ex_connect(argv[1]);
    const char *path = argv[3];
    int rc;
    if (strcmp(argv[2], "set") == 0) {
        const char *v = argv[4];
        rc = zoo_set(zh, path, v, (int)strlen(v), -1);
        if (rc == ZNONODE) rc = zoo_create(zh, path, v, (int)strlen(v), &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
        if (rc == ZNODEEXISTS) rc = zoo_set(zh, path, v, (int)strlen(v), -1);
        if (rc != ZOK) ex_die(path, rc);
        printf("set %s = %s\n", path, v);
    } else if (strcmp(argv[2], "watch") == 0) {
        int want = atoi(argv[4]);
        char last[1024] = "";
        int have_last = 0;
        for (int printed = 0; printed < want;) {
            int seen = ex_seen();
            char buf[1024];
            int len = sizeof buf - 1;
            struct Stat st;
            rc = zoo_wget(zh, path, ex_watcher, NULL, buf, &len, &st);
            if (rc == ZNONODE) {
                /* Not there yet: wait for its creation. */
                rc = zoo_wexists(zh, path, ex_watcher, NULL, NULL);
                if (rc == ZNONODE) {
                    ex_wait_event(seen);
                    continue;
                }
                if (rc == ZOK) continue;
            }
            if (rc != ZOK) ex_die(path, rc);
            buf[len < 0 ? 0 : len] = 0;
            if (!have_last || strcmp(buf, last) != 0) {
                printf("%s = %s\n", path, buf);
                fflush(stdout);
                printed++;
                snprintf(last, sizeof last, "%s", buf);
                have_last = 1;
            }
            if (printed < want) ex_wait_event(seen);
        }
    } else {
        fprintf(stderr, "unknown command %s\n", argv[2]);
        return 2;
    }
    zookeeper_close(zh);
    return 0;
}
