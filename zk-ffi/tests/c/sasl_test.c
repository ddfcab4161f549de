/* zookeeper_init_sasl through the C API (mt) against a server with SASL DIGEST-MD5 users.
 * Usage: sasl_test host:port good-password-file bad-password-file
 * bob (basic callbacks, password from a file) creates a node only sasl:bob may read; an
 * anonymous handle gets ZNOAUTH; callbacks written here (SASL_CB_AUTHNAME and SASL_CB_PASS,
 * Cyrus's calling conventions) read it too; a wrong password ends in ZOO_AUTH_FAILED_STATE; a
 * mechanism list naming neither DIGEST-MD5 nor GSSAPI gives NULL with EINVAL. Prints one line per check; exits
 * non-zero on a failure. */
#define _GNU_SOURCE
#include <zookeeper/zookeeper.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Cyrus SASL's types and ids, as <sasl/sasl.h> defines them (not installed here: libzkrs needs
 * no Cyrus). Debian's zookeeper.h declares the SASL calls only with HAVE_CYRUS_SASL_H and its
 * library has none: they are looked up when the program runs, in libzkrs. */
typedef struct sasl_callback { unsigned long id; int (*proc)(void); void *context; } sasl_callback_t;
typedef struct sasl_secret { unsigned long len; unsigned char data[1]; } sasl_secret_t;
#define SASL_CB_LIST_END 0
#define SASL_CB_AUTHNAME 0x4002
#define SASL_CB_PASS 0x4004
#define SASL_OK 0
typedef struct zoo_sasl_params {
    const char *service, *host, *mechlist;
    const sasl_callback_t *callbacks;
} zoo_sasl_params_t;
typedef zhandle_t *(*init_sasl_fn)(const char *host, watcher_fn fn, int recv_timeout, const clientid_t *clientid,
                                   void *context, int flags, log_callback_fn log_callback, zoo_sasl_params_t *params);
typedef sasl_callback_t *(*basic_fn)(const char *user, const char *realm, const char *password_file);

static int failures;
#define CHECK(cond, ...) do { if (cond) { printf("ok   "); } else { printf("FAIL "); failures++; } \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

static int wait_state(zhandle_t *zh, int want) {
    for (int i = 0; i < 100; i++) {
        if (zoo_state(zh) == want) return 1;
        usleep(100 * 1000);
    }
    return 0;
}

static int my_name(void *ctx, int id, const char **result, unsigned *len) {
    (void)id;
    *result = ctx;
    if (len) *len = strlen(ctx);
    return SASL_OK;
}

/* A secret as Cyrus callers make one: the length, then the bytes from `data` on. */
static int my_pass(void *conn, void *ctx, int id, sasl_secret_t **out) {
    (void)conn; (void)id;
    static sasl_secret_t *secret;
    if (!secret) {
        secret = malloc(sizeof(sasl_secret_t) + strlen(ctx));
        secret->len = strlen(ctx);
        memcpy(secret->data, ctx, secret->len);
    }
    *out = secret;
    return SASL_OK;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: sasl_test host:port good-password-file bad-password-file\n");
        return 2;
    }
    init_sasl_fn init_sasl = (init_sasl_fn)dlsym(RTLD_DEFAULT, "zookeeper_init_sasl");
    basic_fn basic = (basic_fn)dlsym(RTLD_DEFAULT, "zoo_sasl_make_basic_callbacks");
    CHECK(init_sasl && basic, "zookeeper_init_sasl and zoo_sasl_make_basic_callbacks are exported");
    if (!init_sasl || !basic) return 1;
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);

    sasl_callback_t *cbs = basic("bob", NULL, argv[2]);
    zoo_sasl_params_t params = { "zookeeper", "zk-sasl-md5", "DIGEST-MD5", cbs };
    zhandle_t *bob = init_sasl(argv[1], watcher, 10000, NULL, NULL, 0, NULL, &params);
    CHECK(bob && wait_state(bob, ZOO_CONNECTED_STATE), "bob connects with SASL");
    struct Id id = { "sasl", "bob" };
    struct ACL acl = { ZOO_PERM_ALL, id };
    struct ACL_vector only_bob = { 1, &acl };
    char path[64];
    int rc = zoo_create(bob, "/sasl", "v", 1, &only_bob, 0, path, sizeof path);
    CHECK(rc == ZOK, "bob creates /sasl readable by sasl:bob only (%d)", rc);
    char buf[16];
    int len = sizeof buf;
    rc = zoo_get(bob, "/sasl", 0, buf, &len, NULL);
    CHECK(rc == ZOK && len == 1 && buf[0] == 'v', "bob reads /sasl (%d)", rc);

    zhandle_t *anon = zookeeper_init(argv[1], watcher, 10000, NULL, NULL, 0);
    CHECK(anon && wait_state(anon, ZOO_CONNECTED_STATE), "an anonymous handle connects");
    len = sizeof buf;
    rc = zoo_get(anon, "/sasl", 0, buf, &len, NULL);
    CHECK(rc == ZNOAUTH, "the anonymous handle gets ZNOAUTH (%d)", rc);

    sasl_callback_t mine[] = {
        { SASL_CB_AUTHNAME, (int (*)(void))my_name, "bob" },
        { SASL_CB_PASS, (int (*)(void))my_pass, "bobpw" },
        { SASL_CB_LIST_END, NULL, NULL },
    };
    zoo_sasl_params_t own = { "zookeeper", "zk-sasl-md5", "DIGEST-MD5", mine };
    zhandle_t *bob2 = init_sasl(argv[1], watcher, 10000, NULL, NULL, 0, NULL, &own);
    CHECK(bob2 && wait_state(bob2, ZOO_CONNECTED_STATE), "bob connects with his own callbacks");
    len = sizeof buf;
    rc = zoo_get(bob2, "/sasl", 0, buf, &len, NULL);
    CHECK(rc == ZOK, "and reads /sasl (%d)", rc);

    sasl_callback_t *bad = basic("bob", NULL, argv[3]);
    zoo_sasl_params_t wrong = { "zookeeper", "zk-sasl-md5", "DIGEST-MD5", bad };
    zhandle_t *eve = init_sasl(argv[1], watcher, 10000, NULL, NULL, 0, NULL, &wrong);
    CHECK(eve && wait_state(eve, ZOO_AUTH_FAILED_STATE), "a wrong password ends in ZOO_AUTH_FAILED_STATE");

    zoo_sasl_params_t plain = { "zookeeper", "zk-sasl-md5", "PLAIN", cbs };
    errno = 0;
    zhandle_t *none = init_sasl(argv[1], watcher, 10000, NULL, NULL, 0, NULL, &plain);
    CHECK(none == NULL && errno == EINVAL, "a mechanism list without DIGEST-MD5 or GSSAPI is refused with EINVAL");

    zookeeper_close(bob);
    zookeeper_close(bob2);
    zookeeper_close(anon);
    if (eve) zookeeper_close(eve);
    free(cbs);
    free(bad);
    if (failures == 0) printf("DONE\n");
    return failures ? 1 : 0;
}
