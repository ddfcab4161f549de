/* zookeeper_init_ssl through the C API (mt) against a TLS client port the Rust test set up.
 * Usage: tls_test host:port alice-spec bob-spec subject, where a spec is "ca,cert,key,passwd".
 * alice creates a node only her certificate's x509 id may read; bob must get ZNOAUTH; a spec
 * naming a missing file gives NULL with EINVAL. Prints one line per check; exits non-zero on a
 * failure. */
#define _GNU_SOURCE
#include <zookeeper/zookeeper.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Apache's header declares it only when built with OpenSSL (HAVE_OPENSSL_H), and Debian's
 * library, which this is linked against, has no such symbol: it is looked up when the program
 * runs, in whichever library the loader chose (libzkrs in the test). */
typedef zhandle_t *(*init_ssl_fn)(const char *host, const char *cert, watcher_fn fn, int recv_timeout,
                                  const clientid_t *clientid, void *context, int flags);
static init_ssl_fn zookeeper_init_ssl;

static int failures;
#define CHECK(cond, ...) do { if (cond) { printf("ok   "); } else { printf("FAIL "); failures++; } \
    printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

static int wait_connected(zhandle_t *zh) {
    for (int i = 0; i < 100; i++) {
        if (zoo_state(zh) == ZOO_CONNECTED_STATE) return 1;
        usleep(100 * 1000);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: tls_test host:port alice-spec bob-spec subject\n");
        return 2;
    }
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    zookeeper_init_ssl = (init_ssl_fn)dlsym(RTLD_DEFAULT, "zookeeper_init_ssl");
    CHECK(zookeeper_init_ssl != NULL, "the library has zookeeper_init_ssl");
    if (!zookeeper_init_ssl) return 1;
    zhandle_t *alice = zookeeper_init_ssl(argv[1], argv[2], watcher, 10000, 0, 0, 0);
    CHECK(alice != NULL, "alice's handle");
    if (!alice) return 1;
    CHECK(wait_connected(alice), "alice connected over TLS");
    struct Id id = { "x509", argv[4] };
    struct ACL acl = { ZOO_PERM_ALL, id };
    struct ACL_vector acls = { 1, &acl };
    int rc = zoo_create(alice, "/c-tls", "v", 1, &acls, 0, NULL, 0);
    CHECK(rc == ZOK, "alice creates /c-tls for x509:%s: %d", argv[4], rc);
    char buf[16];
    int len = sizeof buf;
    rc = zoo_get(alice, "/c-tls", 0, buf, &len, NULL);
    CHECK(rc == ZOK && len == 1 && buf[0] == 'v', "alice reads it: %d", rc);

    zhandle_t *bob = zookeeper_init_ssl(argv[1], argv[3], watcher, 10000, 0, 0, 0);
    CHECK(bob != NULL && wait_connected(bob), "bob connected over TLS");
    len = sizeof buf;
    rc = bob ? zoo_get(bob, "/c-tls", 0, buf, &len, NULL) : -999;
    CHECK(rc == ZNOAUTH, "bob gets ZNOAUTH: %d", rc);

    errno = 0;
    zhandle_t *bad = zookeeper_init_ssl(argv[1], "/nonexistent/ca.pem", watcher, 10000, 0, 0, 0);
    CHECK(bad == NULL && errno == EINVAL, "a missing CA file: NULL, EINVAL (%d)", errno);

    if (bob) zookeeper_close(bob);
    zookeeper_close(alice);
    printf("%s\n", failures ? "FAILED" : "DONE");
    return failures ? 1 : 0;
}
