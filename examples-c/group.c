/* Group membership: a group is a persistent node, each member an ephemeral child that lives as
 * long as the member's session.
 *   group HOSTS create GROUP            -> "created /GROUP"
 *   group HOSTS join GROUP MEMBER SECS  -> "joined /GROUP/MEMBER", stays SECS seconds
 *   group HOSTS list GROUP              -> members, sorted, one a line ("no members" if none)
 *   group HOSTS delete GROUP            -> "deleted /GROUP" (members first) */
#include "common.h"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: group HOSTS create|join|list|delete GROUP [MEMBER SECS]\n");
        return 2;
    }
    zhandle_t *zh = ex_connect(argv[1]);
    const char *cmd = argv[2];
    char group[256], path[512];
    snprintf(group, sizeof group, "/%s", argv[3]);
    int rc;
    if (strcmp(cmd, "create") == 0) {
        rc = zoo_create(zh, group, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0);
        if (rc != ZOK) ex_die(group, rc);
        printf("created %s\n", group);
    } else if (strcmp(cmd, "join") == 0 && argc >= 6) {
        snprintf(path, sizeof path, "%s/%s", group, argv[4]);
        rc = zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0);
        if (rc != ZOK) ex_die(path, rc);
        printf("joined %s\n", path);
        fflush(stdout);
        ex_sleep_ms(atoi(argv[5]) * 1000);
    } else if (strcmp(cmd, "list") == 0) {
        struct String_vector kids;
        rc = zoo_get_children(zh, group, 0, &kids);
        if (rc != ZOK) ex_die(group, rc);
        if (kids.count == 0) printf("no members in %s\n", group);
        qsort(kids.data, kids.count, sizeof(char *), ex_cmp);
        for (int i = 0; i < kids.count; i++) printf("%s\n", kids.data[i]);
        deallocate_String_vector(&kids);
    } else if (strcmp(cmd, "delete") == 0) {
        struct String_vector kids;
        rc = zoo_get_children(zh, group, 0, &kids);
        if (rc != ZOK) ex_die(group, rc);
        for (int i = 0; i < kids.count; i++) {
            snprintf(path, sizeof path, "%s/%s", group, kids.data[i]);
            rc = zoo_delete(zh, path, -1);
            if (rc != ZOK && rc != ZNONODE) ex_die(path, rc);
        }
        deallocate_String_vector(&kids);
        rc = zoo_delete(zh, group, -1);
        if (rc != ZOK) ex_die(group, rc);
        printf("deleted %s\n", group);
    } else {
        fprintf(stderr, "unknown command %s\n", cmd);
        return 2;
    }
    zookeeper_close(zh);
    return 0;
}
