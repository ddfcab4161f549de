/* Dynamic reconfiguration through the C API (mt), against an ensemble with reconfigEnabled the
 * Rust test starts. Usage: reconfig_test host:port,... N "server.N=<spec>" (a follower's id and
 * its spec as a joining entry). Without auth (ZNOAUTH), then as the super user (super:secret):
 * zoo_getconfig, zoo_reconfig removing server N, zoo_reconfig with a stale version
 * (ZBADVERSION), zoo_reconfig adding server N back. Prints one line per check; exits non-zero on
 * a failure. */
#include <zookeeper/zookeeper.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int failures;
#define CHECK(cond, ...) do { if (cond) { printf("ok   "); } else { printf("FAIL "); failures++; } \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static int wait_connected(zhandle_t *zh) {
    for (int i = 0; i < 300; i++) {
        if (zoo_state(zh) == ZOO_CONNECTED_STATE) return 1;
        usleep(100 * 1000);
    }
    return 0;
}

static volatile int auth_rc = 1;
static void auth_done(int rc, const void *data) { (void)data; auth_rc = rc; }

/* zoo_reconfig, tried again (after the client reconnects) when the connection was lost: a
 * server whose leader changes with the configuration closes its clients, as Apache's do. */
static int reconfig(zhandle_t *zh, const char *joining, const char *leaving, long long version,
                    char *buf, int *len, struct Stat *stat) {
    int cap = *len, rc = ZCONNECTIONLOSS;
    for (int i = 0; i < 5 && (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT); i++) {
        if (i > 0) wait_connected(zh);
        *len = cap;
        rc = zoo_reconfig(zh, joining, leaving, NULL, version, buf, len, stat);
    }
    return rc;
}

/* The configuration's version line, as a number; -1 when there is none. */
static long long version_of(const char *config) {
    const char *v = strstr(config, "version=");
    long long n = -1;
    if (v && sscanf(v + 8, "%llx", &n) != 1) n = -1;
    return n;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: reconfig_test hosts id joining\n");
        return 2;
    }
    const char *id = argv[2], *joining = argv[3];
    char entry[32];
    snprintf(entry, sizeof entry, "server.%s=", id);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zhandle_t *zh = zookeeper_init(argv[1], NULL, 10000, NULL, NULL, 0);
    CHECK(zh && wait_connected(zh), "connected");
    if (!zh) return 1;

    char buf[4096];
    int len = sizeof buf - 1;
    struct Stat stat;
    int rc = reconfig(zh, NULL, id, -1, buf, &len, &stat);
    CHECK(rc == ZNOAUTH, "reconfig without auth: %d", rc);

    CHECK(zoo_add_auth(zh, "digest", "super:secret", 12, auth_done, NULL) == ZOK, "addauth sent");
    for (int i = 0; i < 100 && auth_rc == 1; i++) usleep(100 * 1000);
    CHECK(auth_rc == ZOK, "addauth: %d", auth_rc);

    len = sizeof buf - 1;
    rc = zoo_getconfig(zh, 0, buf, &len, &stat);
    buf[len > 0 ? len : 0] = 0;
    long long v0 = version_of(buf);
    CHECK(rc == ZOK && strstr(buf, entry) && v0 > 0, "getconfig: %d, version %llx", rc, v0);

    len = sizeof buf - 1;
    rc = reconfig(zh, NULL, id, v0, buf, &len, &stat);
    buf[len > 0 ? len : 0] = 0;
    long long v1 = version_of(buf);
    CHECK(rc == ZOK && !strstr(buf, entry) && v1 > v0 && stat.version == -1,
          "remove the follower: %d, version %llx, stat version %d", rc, v1, stat.version);

    len = sizeof buf - 1;
    rc = reconfig(zh, joining, NULL, v0, buf, &len, &stat);
    CHECK(rc == ZBADVERSION, "add it back from the old version: %d", rc);

    /* The server stays connected as a non-voting follower: it can be added back at once. */
    len = sizeof buf - 1;
    rc = reconfig(zh, joining, NULL, -1, buf, &len, &stat);
    buf[len > 0 ? len : 0] = 0;
    CHECK(rc == ZOK && strstr(buf, entry) && version_of(buf) > v1, "add it back: %d", rc);

    len = sizeof buf - 1;
    rc = zoo_getconfig(zh, 0, buf, &len, &stat);
    buf[len > 0 ? len : 0] = 0;
    CHECK(rc == ZOK && strstr(buf, entry) && stat.version == -1, "getconfig after: %d", rc);

    zookeeper_close(zh);
    printf("%s\n", failures ? "FAILED" : "ALL OK");
    return failures ? 1 : 0;
}
