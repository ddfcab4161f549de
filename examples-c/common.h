/* Shared by the example programs: connecting, waiting for watch events, error exits. */
#ifndef EXAMPLES_COMMON_H
#define EXAMPLES_COMMON_H

#include <zookeeper.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t ex_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ex_cv = PTHREAD_COND_INITIALIZER;
static int ex_connected;
/* Bumped by every node watch event; waiters compare against the value they saw. */
static int ex_events;

static void ex_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)path; (void)ctx;
    pthread_mutex_lock(&ex_mu);
    if (type == ZOO_SESSION_EVENT) {
        ex_connected = state == ZOO_CONNECTED_STATE;
        if (state == ZOO_EXPIRED_SESSION_STATE) {
            fprintf(stderr, "session expired\n");
            exit(3);
        }
    } else {
        ex_events++;
    }
    pthread_cond_broadcast(&ex_cv);
    pthread_mutex_unlock(&ex_mu);
}

static inline void ex_die(const char *what, int rc) {
    fprintf(stderr, "%s: %s (%d)\n", what, zerror(rc), rc);
    exit(1);
}

/* Connects and waits (up to 15 s) for the session. */
static inline zhandle_t *ex_connect(const char *hosts) {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zhandle_t *zh = zookeeper_init(hosts, ex_watcher, 10000, NULL, NULL, 0);
    if (!zh) {
        perror("zookeeper_init");
        exit(1);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 15;
    pthread_mutex_lock(&ex_mu);
    while (!ex_connected) {
        if (pthread_cond_timedwait(&ex_cv, &ex_mu, &until) != 0) {
            fprintf(stderr, "could not connect to %s\n", hosts);
            exit(1);
        }
    }
    pthread_mutex_unlock(&ex_mu);
    return zh;
}

/* The current event count. */
static inline int ex_seen(void) {
    pthread_mutex_lock(&ex_mu);
    int n = ex_events;
    pthread_mutex_unlock(&ex_mu);
    return n;
}

/* Waits until a watch event arrives after `seen` was read. */
static inline void ex_wait_event(int seen) {
    pthread_mutex_lock(&ex_mu);
    while (ex_events == seen) pthread_cond_wait(&ex_cv, &ex_mu);
    pthread_mutex_unlock(&ex_mu);
}

static inline void ex_sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Creates `path` (persistent, empty) unless it exists. */
static inline void ex_ensure(zhandle_t *zh, const char *path) {
    int rc = zoo_create(zh, path, "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0);
    if (rc != ZOK && rc != ZNODEEXISTS) ex_die(path, rc);
}

static inline int ex_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

#endif
