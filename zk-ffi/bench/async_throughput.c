/* Async throughput of the C API: N operations with at most WINDOW outstanding, on one handle.
 * The same source runs on libzkrs and on Apache's libzookeeper_mt (chosen by the loader).
 *   async_throughput HOSTS get|set N WINDOW SIZE
 * Prints: "op=get n=N window=W size=S secs=T ops_per_sec=R errors=E". */
#include <zookeeper.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int connected, outstanding, done, errors;

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)path; (void)ctx;
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) {
        pthread_mutex_lock(&mu);
        connected = 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
}

static void finish(int rc) {
    pthread_mutex_lock(&mu);
    outstanding--;
    done++;
    if (rc != ZOK) errors++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void data_cb(int rc, const char *v, int len, const struct Stat *s, const void *d) {
    (void)v; (void)len; (void)s; (void)d;
    finish(rc);
}

static void stat_cb(int rc, const struct Stat *s, const void *d) {
    (void)s; (void)d;
    finish(rc);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: async_throughput HOSTS get|set N WINDOW SIZE\n");
        return 2;
    }
    const char *op = argv[2];
    int n = atoi(argv[3]), window = atoi(argv[4]), size = atoi(argv[5]);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zhandle_t *zh = zookeeper_init(argv[1], watcher, 30000, NULL, NULL, 0);
    if (!zh) return 1;
    pthread_mutex_lock(&mu);
    while (!connected) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    char path[64];
    snprintf(path, sizeof path, "/bench-%d", (int)getpid());
    char *payload = calloc(1, size > 0 ? size : 1);
    memset(payload, 'x', size);
    int rc = zoo_create(zh, path, payload, size, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    if (rc != ZOK) {
        fprintf(stderr, "create: %s\n", zerror(rc));
        return 1;
    }
    int is_get = strcmp(op, "get") == 0;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&mu);
        while (outstanding >= window) pthread_cond_wait(&cv, &mu);
        outstanding++;
        pthread_mutex_unlock(&mu);
        rc = is_get ? zoo_aget(zh, path, 0, data_cb, NULL) : zoo_aset(zh, path, payload, size, -1, stat_cb, NULL);
        if (rc != ZOK) finish(rc);
    }
    pthread_mutex_lock(&mu);
    while (done < n) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    double secs = now() - t0;
    printf("op=%s n=%d window=%d size=%d secs=%.3f ops_per_sec=%.0f errors=%d\n", op, n, window, size, secs,
           n / secs, errors);
    zoo_delete(zh, path, -1);
    zookeeper_close(zh);
    free(payload);
    return errors ? 1 : 0;
}
