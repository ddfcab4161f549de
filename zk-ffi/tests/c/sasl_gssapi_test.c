/* zookeeper_init_sasl with GSSAPI through the C API (mt), as a program built for Apache's C
 * client with Cyrus SASL calls it: {"zookeeper", <server host>, "GSSAPI", callbacks}, the
 * credentials from the environment (KRB5CCNAME's ticket cache, else KRB5_CLIENT_KTNAME's keytab),
 * the realm's configuration from KRB5_CONFIG.
 * Usage: sasl_gssapi_test host:port server-host realm bob-keytab ccache-prefix
 * alice (the ticket cache the caller names in KRB5CCNAME) is sasl:alice@REALM to zoo_whoami
 * (libzkrs's extension), creates a node only she may read and reads it; an anonymous handle gets
 * ZNOAUTH; a server host with no principal in the realm ends in ZOO_AUTH_FAILED_STATE. Then,
 * alone in the process, from an empty ticket cache (<ccache-prefix>.bob): bob's client keytab
 * authenticates him (whoami says so; he cannot read alice's node, he can read his own; the
 * library keeps his tickets in that cache); from another empty cache (<ccache-prefix>.none) with
 * no keytab the handle ends in ZOO_AUTH_FAILED_STATE, and alice is still served. Prints one line
 * per check; exits non-zero on a failure. */
#define _GNU_SOURCE
#include <zookeeper/zookeeper.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Cyrus SASL's callback type and end marker, as <sasl/sasl.h> defines them (not installed here:
 * libzkrs needs no Cyrus); the SASL calls are looked up in libzkrs when the program runs. */
typedef struct sasl_callback { unsigned long id; int (*proc)(void); void *context; } sasl_callback_t;
#define SASL_CB_LIST_END 0
typedef struct zoo_sasl_params {
    const char *service, *host, *mechlist;
    const sasl_callback_t *callbacks;
} zoo_sasl_params_t;
typedef int (*whoami_fn)(zhandle_t *zh, struct ClientInfo_vector *infos);
typedef zhandle_t *(*init_sasl_fn)(const char *host, watcher_fn fn, int recv_timeout, const clientid_t *clientid,
                                   void *context, int flags, log_callback_fn log_callback, zoo_sasl_params_t *params);

static int failures;
#define CHECK(cond, ...) do { if (cond) { printf("ok   "); } else { printf("FAIL "); failures++; } \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

static int wait_state(zhandle_t *zh, int want) {
    for (int i = 0; i < 150; i++) {
        if (zoo_state(zh) == want) return 1;
        usleep(100 * 1000);
    }
    return 0;
}

/* Whether the server knows the session by scheme:id (zoo_whoami, libzkrs's extension). */
static int known_as(whoami_fn whoami, zhandle_t *zh, const char *scheme, const char *id) {
    struct ClientInfo_vector who = { 0, NULL };
    if (whoami(zh, &who) != ZOK) return 0;
    int found = 0;
    for (int i = 0; i < who.count; i++)
        if (!strcmp(who.data[i].authScheme, scheme) && !strcmp(who.data[i].user, id)) found = 1;
    deallocate_ClientInfo_vector(&who);
    return found;
}

static int create_only_for(zhandle_t *zh, const char *node, const char *principal) {
    struct Id id = { "sasl", (char *)principal };
    struct ACL acl = { ZOO_PERM_ALL, id };
    struct ACL_vector only = { 1, &acl };
    char path[64];
    return zoo_create(zh, node, "v", 1, &only, 0, path, sizeof path);
}

static int get(zhandle_t *zh, const char *node) {
    char buf[16];
    int len = sizeof buf;
    return zoo_get(zh, node, 0, buf, &len, NULL);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: sasl_gssapi_test host:port server-host realm bob-keytab ccache-prefix\n");
        return 2;
    }
    const char *hosts = argv[1], *server = argv[2], *realm = argv[3];
    init_sasl_fn init_sasl = (init_sasl_fn)dlsym(RTLD_DEFAULT, "zookeeper_init_sasl");
    whoami_fn whoami = (whoami_fn)dlsym(RTLD_DEFAULT, "zoo_whoami");
    CHECK(init_sasl && whoami, "zookeeper_init_sasl and zoo_whoami are exported");
    if (!init_sasl || !whoami) return 1;
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    char alice_id[128], bob_id[128];
    snprintf(alice_id, sizeof alice_id, "alice@%s", realm);
    snprintf(bob_id, sizeof bob_id, "bob@%s", realm);

    sasl_callback_t callbacks[] = { { SASL_CB_LIST_END, NULL, NULL } };
    zoo_sasl_params_t params = { "zookeeper", server, "GSSAPI", callbacks };
    zhandle_t *alice = init_sasl(hosts, watcher, 10000, NULL, NULL, 0, NULL, &params);
    CHECK(alice && wait_state(alice, ZOO_CONNECTED_STATE), "alice connects with GSSAPI from her ticket cache");
    CHECK(known_as(whoami, alice, "sasl", alice_id), "whoami: sasl %s", alice_id);
    int rc = create_only_for(alice, "/krb-alice", alice_id);
    CHECK(rc == ZOK, "alice creates /krb-alice for sasl:%s only (%d)", alice_id, rc);
    rc = get(alice, "/krb-alice");
    CHECK(rc == ZOK, "alice reads /krb-alice (%d)", rc);

    zhandle_t *anon = zookeeper_init(hosts, watcher, 10000, NULL, NULL, 0);
    CHECK(anon && wait_state(anon, ZOO_CONNECTED_STATE), "an anonymous handle connects");
    rc = get(anon, "/krb-alice");
    CHECK(rc == ZNOAUTH, "the anonymous handle gets ZNOAUTH (%d)", rc);

    zoo_sasl_params_t unknown = { "zookeeper", "nowhere.invalid", "GSSAPI", callbacks };
    zhandle_t *lost = init_sasl(hosts, watcher, 10000, NULL, NULL, 0, NULL, &unknown);
    CHECK(lost && wait_state(lost, ZOO_AUTH_FAILED_STATE), "an unknown service principal ends in ZOO_AUTH_FAILED_STATE");
    zookeeper_close(anon);
    if (lost) zookeeper_close(lost);

    /* Alone in the process now (alice's handle is idle): the environment Kerberos reads. */
    char empty[4096];
    snprintf(empty, sizeof empty, "FILE:%s.bob", argv[5]);
    setenv("KRB5CCNAME", empty, 1);
    setenv("KRB5_CLIENT_KTNAME", argv[4], 1);
    zhandle_t *bob = init_sasl(hosts, watcher, 10000, NULL, NULL, 0, NULL, &params);
    CHECK(bob && wait_state(bob, ZOO_CONNECTED_STATE), "bob connects with GSSAPI from his client keytab");
    CHECK(known_as(whoami, bob, "sasl", bob_id) && !known_as(whoami, bob, "sasl", alice_id), "whoami: sasl %s only", bob_id);
    rc = get(bob, "/krb-alice");
    CHECK(rc == ZNOAUTH, "bob gets ZNOAUTH on /krb-alice (%d)", rc);
    rc = create_only_for(bob, "/krb-bob", bob_id);
    int rc2 = get(bob, "/krb-bob");
    CHECK(rc == ZOK && rc2 == ZOK, "bob creates and reads /krb-bob for sasl:%s only (%d, %d)", bob_id, rc, rc2);
    zookeeper_close(bob);

    unsetenv("KRB5_CLIENT_KTNAME");
    snprintf(empty, sizeof empty, "FILE:%s.none", argv[5]);
    setenv("KRB5CCNAME", empty, 1);
    zhandle_t *none = init_sasl(hosts, watcher, 10000, NULL, NULL, 0, NULL, &params);
    CHECK(none && wait_state(none, ZOO_AUTH_FAILED_STATE), "no ticket and no keytab end in ZOO_AUTH_FAILED_STATE");
    if (none) zookeeper_close(none);
    rc = get(alice, "/krb-alice");
    CHECK(rc == ZOK, "alice is still served (%d)", rc);
    zookeeper_close(alice);
    if (failures == 0) printf("DONE\n");
    return failures ? 1 : 0;
}
