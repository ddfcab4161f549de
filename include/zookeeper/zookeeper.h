/* zkrs: the C client API of Apache ZooKeeper 3.8 (zookeeper_mt / zookeeper_st), implemented by
 * libzkrs. Source compatible with Apache's zookeeper.h: same types, layouts, constants and
 * prototypes. Build with -DTHREADED for the multi-threaded library (the synchronous calls);
 * without it, zookeeper_interest/zookeeper_process drive the handle from the application's loop.
 *
 * Conventions for every call: a NULL handle, NULL or invalid path (not absolute, trailing "/",
 * empty segment, "." or "..") returns ZBADARGUMENTS and never calls the completion; a session
 * that has ended returns ZINVALIDSTATE. Memory the library hands out comes from malloc: free it
 * with the deallocate_* helpers or free(). Pointers passed to completions live only during the
 * callback. */
#ifndef ZOOKEEPER_H_
#define ZOOKEEPER_H_

#include <stdlib.h>
#include <stdio.h>
#include <ctype.h>
#include <sys/socket.h>
#include <sys/time.h>

#ifndef ZOOAPI
#define ZOOAPI
#endif

#include "proto.h"
#include "zookeeper_version.h"
#include "recordio.h"
#include "zookeeper.jute.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. Below ZAPIERROR: system and client errors; from it down: server answers. */
enum ZOO_ERRORS {
    ZOK = 0,
    ZSYSTEMERROR = -1,
    ZRUNTIMEINCONSISTENCY = -2,
    ZDATAINCONSISTENCY = -3,
    ZCONNECTIONLOSS = -4,
    ZMARSHALLINGERROR = -5,
    ZUNIMPLEMENTED = -6,
    ZOPERATIONTIMEOUT = -7,
    ZBADARGUMENTS = -8,
    ZINVALIDSTATE = -9,
    ZNEWCONFIGNOQUORUM = -13,
    ZRECONFIGINPROGRESS = -14,
    ZSSLCONNECTIONERROR = -15,
    ZAPIERROR = -100,
    ZNONODE = -101,
    ZNOAUTH = -102,
    ZBADVERSION = -103,
    ZNOCHILDRENFOREPHEMERALS = -108,
    ZNODEEXISTS = -110,
    ZNOTEMPTY = -111,
    ZSESSIONEXPIRED = -112,
    ZINVALIDCALLBACK = -113,
    ZINVALIDACL = -114,
    ZAUTHFAILED = -115,
    ZCLOSING = -116,
    ZNOTHING = -117,
    ZSESSIONMOVED = -118,
    ZNOTREADONLY = -119,
    ZEPHEMERALONLOCALSESSION = -120,
    ZNOWATCHER = -121,
    ZRECONFIGDISABLED = -123,
    ZSESSIONCLOSEDREQUIRESASLAUTH = -124,
    ZTHROTTLEDOP = -127
};

typedef enum {
    ZOO_LOG_LEVEL_ERROR = 1,
    ZOO_LOG_LEVEL_WARN = 2,
    ZOO_LOG_LEVEL_INFO = 3,
    ZOO_LOG_LEVEL_DEBUG = 4
} ZooLogLevel;

/* The dynamic configuration node (zoo_getconfig reads it). */
#define ZOO_CONFIG_NODE "/zookeeper/config"
/* zookeeper_init flags: accept read-only servers; do not log the client environment. */
#define ZOO_READONLY 1
#define ZOO_NO_LOG_CLIENTENV 2

/* Permission bits. */
extern ZOOAPI const int ZOO_PERM_READ;
extern ZOOAPI const int ZOO_PERM_WRITE;
extern ZOOAPI const int ZOO_PERM_CREATE;
extern ZOOAPI const int ZOO_PERM_DELETE;
extern ZOOAPI const int ZOO_PERM_ADMIN;
extern ZOOAPI const int ZOO_PERM_ALL;

/* world:anyone, and the "authenticated as the caller" id (auth:""). */
extern ZOOAPI struct Id ZOO_ANYONE_ID_UNSAFE;
extern ZOOAPI struct Id ZOO_AUTH_IDS;
/* Everything for anyone; read for anyone; everything for the creator. */
extern ZOOAPI struct ACL_vector ZOO_OPEN_ACL_UNSAFE;
extern ZOOAPI struct ACL_vector ZOO_READ_ACL_UNSAFE;
extern ZOOAPI struct ACL_vector ZOO_CREATOR_ALL_ACL;

/* zookeeper_interest bits. */
extern ZOOAPI const int ZOOKEEPER_WRITE;
extern ZOOAPI const int ZOOKEEPER_READ;

/* Create modes. */
extern ZOOAPI const int ZOO_PERSISTENT;
extern ZOOAPI const int ZOO_EPHEMERAL;
extern ZOOAPI const int ZOO_PERSISTENT_SEQUENTIAL;
extern ZOOAPI const int ZOO_EPHEMERAL_SEQUENTIAL;
extern ZOOAPI const int ZOO_CONTAINER;
extern ZOOAPI const int ZOO_PERSISTENT_WITH_TTL;
extern ZOOAPI const int ZOO_PERSISTENT_SEQUENTIAL_WITH_TTL;
extern ZOOAPI const int ZOO_SEQUENCE;

/* Session states (zoo_state, and the state argument of watchers). */
extern ZOOAPI const int ZOO_EXPIRED_SESSION_STATE;
extern ZOOAPI const int ZOO_AUTH_FAILED_STATE;
extern ZOOAPI const int ZOO_CONNECTING_STATE;
extern ZOOAPI const int ZOO_ASSOCIATING_STATE;
extern ZOOAPI const int ZOO_CONNECTED_STATE;
extern ZOOAPI const int ZOO_READONLY_STATE;
extern ZOOAPI const int ZOO_SSL_CONNECTING_STATE;
extern ZOOAPI const int ZOO_NOTCONNECTED_STATE;

/* Watch event types. Session events come with path "" (never NULL). */
extern ZOOAPI const int ZOO_CREATED_EVENT;
extern ZOOAPI const int ZOO_DELETED_EVENT;
extern ZOOAPI const int ZOO_CHANGED_EVENT;
extern ZOOAPI const int ZOO_CHILD_EVENT;
extern ZOOAPI const int ZOO_SESSION_EVENT;
extern ZOOAPI const int ZOO_NOTWATCHING_EVENT;

/* The session handle; opaque. */
typedef struct _zhandle zhandle_t;

/* A session to resume: id and 16-byte password (zoo_client_id of an earlier handle). */
typedef struct {
    int64_t client_id;
    char passwd[16];
} clientid_t;

/* One operation of a multi; fill it with the zoo_*_op_init helpers. */
typedef struct zoo_op {
    int type;
    union {
        struct {
            const char *path;
            const char *data;
            int datalen;          /* -1: null data */
            char *buf;            /* receives the created path */
            int buflen;
            const struct ACL_vector *acl;
            int flags;
            int64_t ttl;
        } create_op;
        struct {
            const char *path;
            int version;
        } delete_op;
        struct {
            const char *path;
            const char *data;
            int datalen;          /* -1: null data */
            int version;
            struct Stat *stat;    /* receives the new Stat, may be NULL */
        } set_op;
        struct {
            const char *path;
            int version;
        } check_op;
        /* libzkrs addition, for zoo_amulti_read / zoo_multi_read only (zkrs_ext.h). These two
         * members are smaller than create_op, so the union's size and every other member's
         * offset are the same as in Apache's header: programs built against either header agree
         * on zoo_op_t. */
        struct {
            const char *path;
            char *buf;            /* receives the data, at most buflen bytes (truncated) */
            int buflen;
            struct Stat *stat;    /* receives the node's Stat, may be NULL */
        } get_data_op;
        struct {
            const char *path;
            struct String_vector *strings; /* receives the children; free with
                                              deallocate_String_vector */
        } get_children_op;
    };
} zoo_op_t;

ZOOAPI void zoo_create_op_init(zoo_op_t *op, const char *path, const char *value, int valuelen,
                               const struct ACL_vector *acl, int mode, char *path_buffer,
                               int path_buffer_len);
ZOOAPI void zoo_create2_op_init(zoo_op_t *op, const char *path, const char *value, int valuelen,
                                const struct ACL_vector *acl, int mode, char *path_buffer,
                                int path_buffer_len);
ZOOAPI void zoo_delete_op_init(zoo_op_t *op, const char *path, int version);
ZOOAPI void zoo_set_op_init(zoo_op_t *op, const char *path, const char *buffer, int buflen,
                            int version, struct Stat *stat);
ZOOAPI void zoo_check_op_init(zoo_op_t *op, const char *path, int version);

/* One result of a multi: err, and for creates the path in the op's buffer.
 * For a multiRead getData: value = the op's buf, valuelen = bytes copied (-1 for null data),
 * stat = the op's stat. For a multiRead getChildren: the names are in the op's String_vector. */
typedef struct zoo_op_result {
    int err;
    char *value;
    int valuelen;
    struct Stat *stat;
} zoo_op_result_t;

/* Called for watch and session events; runs on the completion thread (mt) or inside
 * zookeeper_process (st). */
typedef void (*watcher_fn)(zhandle_t *zh, int type, int state, const char *path, void *watcherCtx);
/* Receives each formatted log line. */
typedef void (*log_callback_fn)(const char *message);

/* Completion callbacks: rc is ZOK or the error; on error the value pointers are NULL. */
typedef void (*void_completion_t)(int rc, const void *data);
typedef void (*stat_completion_t)(int rc, const struct Stat *stat, const void *data);
/* value is NULL and value_len -1 when the node holds null data. */
typedef void (*data_completion_t)(int rc, const char *value, int value_len,
                                  const struct Stat *stat, const void *data);
typedef void (*strings_completion_t)(int rc, const struct String_vector *strings, const void *data);
typedef void (*string_stat_completion_t)(int rc, const char *string, const struct Stat *stat,
                                         const void *data);
typedef void (*strings_stat_completion_t)(int rc, const struct String_vector *strings,
                                          const struct Stat *stat, const void *data);
typedef void (*string_completion_t)(int rc, const char *value, const void *data);
typedef void (*acl_completion_t)(int rc, struct ACL_vector *acl, struct Stat *stat, const void *data);

/* ---- handle lifecycle ---- */

/* Starts a session to "host:port,host:port[/chroot]". Returns NULL with errno set (EINVAL for a
 * bad host string, ENOENT when a host does not resolve). `fn` gets session events with
 * `context`. */
ZOOAPI zhandle_t *zookeeper_init(const char *host, watcher_fn fn, int recv_timeout,
                                 const clientid_t *clientid, void *context, int flags);
/* zookeeper_init with a log callback for this handle. */
ZOOAPI zhandle_t *zookeeper_init2(const char *host, watcher_fn fn, int recv_timeout,
                                  const clientid_t *clientid, void *context, int flags,
                                  log_callback_fn log_callback);
/* zookeeper_init over TLS (Apache's C client has it when built with OpenSSL; libzkrs always, on
 * rustls). `cert` is "ca" or "ca,cert,key,passwd": the PEM file of the servers' certificate
 * authority, and optionally this client's certificate chain and private key (`passwd` decrypts
 * an encrypted PKCS#8 key; empty for a plain one). Server certificates are checked against the authority, not host names.
 * Returns NULL with errno EINVAL when `cert` cannot be used. */
ZOOAPI zhandle_t *zookeeper_init_ssl(const char *host, const char *cert, watcher_fn fn,
                                     int recv_timeout, const clientid_t *clientid, void *context,
                                     int flags);
/* SASL, as Apache's C client declares it when built with Cyrus SASL (HAVE_CYRUS_SASL_H, which
 * includes <sasl/sasl.h>); libzkrs has it always, on its own DIGEST-MD5 (and GSSAPI when built
 * with zk-ffi's `kerberos` feature), without linking Cyrus.
 * Define ZKRS_SASL instead to get Cyrus's callback types and ids from here, without Cyrus's
 * headers. */
#if defined(HAVE_CYRUS_SASL_H)
#include <sasl/sasl.h>
#elif defined(ZKRS_SASL)
typedef struct sasl_callback {
    unsigned long id;
    int (*proc)(void);
    void *context;
} sasl_callback_t;
typedef struct sasl_secret {
    unsigned long len;
    unsigned char data[1];
} sasl_secret_t;
#define SASL_OK 0
#define SASL_FAIL (-1)
#define SASL_CB_LIST_END 0
#define SASL_CB_USER 0x4001
#define SASL_CB_AUTHNAME 0x4002
#define SASL_CB_PASS 0x4004
#define SASL_CB_GETREALM 0x4008
#endif
#if defined(HAVE_CYRUS_SASL_H) || defined(ZKRS_SASL)
typedef struct zoo_sasl_params {
    const char *service;              /* "zookeeper" */
    const char *host;                 /* "zk-sasl-md5"; GSSAPI: the server's host name */
    const char *mechlist;             /* "DIGEST-MD5", or "GSSAPI" (Kerberos builds) */
    const sasl_callback_t *callbacks; /* SASL_CB_AUTHNAME or SASL_CB_USER, SASL_CB_PASS */
} zoo_sasl_params_t;
/* zookeeper_init2 with SASL DIGEST-MD5: the callbacks are asked once, here; every connection
 * authenticates before anything else is sent; a refused password ends the session
 * (ZOO_AUTH_FAILED_STATE). With GSSAPI, Kerberos credentials come from KRB5CCNAME's ticket cache
 * or KRB5_CLIENT_KTNAME's keytab for the service service@host; no credentials or an unknown
 * service end the session the same way. Returns NULL with errno EINVAL when the parameters
 * cannot be used. */
ZOOAPI zhandle_t *zookeeper_init_sasl(const char *host, watcher_fn fn, int recv_timeout,
                                      const clientid_t *clientid, void *context, int flags,
                                      log_callback_fn log_callback, zoo_sasl_params_t *sasl_params);
/* A malloc'd callback array: SASL_CB_USER and SASL_CB_AUTHNAME answer `user`,
 * SASL_CB_GETREALM `realm` (NULL: the server's), SASL_CB_PASS the first line of
 * `password_file`. free() it after the handle is closed. */
ZOOAPI sasl_callback_t *zoo_sasl_make_basic_callbacks(const char *user, const char *realm,
                                                      const char *password_file);
#endif

/* Ends the session and frees the handle; pending calls complete with ZCLOSING. */
ZOOAPI int zookeeper_close(zhandle_t *zh);

/* Replaces the server list; the session moves if its server is no longer listed. */
ZOOAPI int zoo_set_servers(zhandle_t *zh, const char *hosts);
ZOOAPI int zoo_set_servers_resolution_delay(zhandle_t *zh, int delay_ms);
ZOOAPI void zoo_cycle_next_server(zhandle_t *zh);
/* "host:port" of the current (or last dialled) server; owned by the handle. */
ZOOAPI const char *zoo_get_current_server(zhandle_t *zh);

ZOOAPI const clientid_t *zoo_client_id(zhandle_t *zh);
/* The negotiated session timeout, ms. */
ZOOAPI int zoo_recv_timeout(zhandle_t *zh);
ZOOAPI const void *zoo_get_context(zhandle_t *zh);
ZOOAPI void zoo_set_context(zhandle_t *zh, void *context);
/* Replaces the global watcher; returns the previous one. */
ZOOAPI watcher_fn zoo_set_watcher(zhandle_t *zh, watcher_fn newFn);
/* The connected server's address, or NULL when not connected. */
ZOOAPI struct sockaddr *zookeeper_get_connected_host(zhandle_t *zh, struct sockaddr *addr,
                                                     socklen_t *addr_len);
/* ZOO_*_STATE; 0 for a closed handle. */
ZOOAPI int zoo_state(zhandle_t *zh);
/* ZINVALIDSTATE once the session expired or auth failed, else ZOK. */
ZOOAPI int is_unrecoverable(zhandle_t *zh);

#ifndef THREADED
/* Single-threaded driving: which fd to poll for what (ZOOKEEPER_READ/WRITE) and how long. */
ZOOAPI int zookeeper_interest(zhandle_t *zh, int *fd, int *interest, struct timeval *tv);
/* After poll: handles the events and runs due completions and watchers (ZNOTHING if none). */
ZOOAPI int zookeeper_process(zhandle_t *zh, int events);
#endif

/* ---- asynchronous calls: return ZOK when queued; the completion gets the result ---- */

ZOOAPI int zoo_acreate(zhandle_t *zh, const char *path, const char *value, int valuelen,
                       const struct ACL_vector *acl, int mode, string_completion_t completion,
                       const void *data);
ZOOAPI int zoo_acreate_ttl(zhandle_t *zh, const char *path, const char *value, int valuelen,
                           const struct ACL_vector *acl, int mode, int64_t ttl,
                           string_completion_t completion, const void *data);
ZOOAPI int zoo_acreate2(zhandle_t *zh, const char *path, const char *value, int valuelen,
                        const struct ACL_vector *acl, int mode,
                        string_stat_completion_t completion, const void *data);
ZOOAPI int zoo_acreate2_ttl(zhandle_t *zh, const char *path, const char *value, int valuelen,
                            const struct ACL_vector *acl, int mode, int64_t ttl,
                            string_stat_completion_t completion, const void *data);
ZOOAPI int zoo_adelete(zhandle_t *zh, const char *path, int version, void_completion_t completion,
                       const void *data);
ZOOAPI int zoo_aexists(zhandle_t *zh, const char *path, int watch, stat_completion_t completion,
                       const void *data);
ZOOAPI int zoo_awexists(zhandle_t *zh, const char *path, watcher_fn watcher, void *watcherCtx,
                        stat_completion_t completion, const void *data);
ZOOAPI int zoo_aget(zhandle_t *zh, const char *path, int watch, data_completion_t completion,
                    const void *data);
ZOOAPI int zoo_awget(zhandle_t *zh, const char *path, watcher_fn watcher, void *watcherCtx,
                     data_completion_t completion, const void *data);
ZOOAPI int zoo_agetconfig(zhandle_t *zh, int watch, data_completion_t completion, const void *data);
ZOOAPI int zoo_awgetconfig(zhandle_t *zh, watcher_fn watcher, void *watcherCtx,
                           data_completion_t completion, const void *data);
ZOOAPI int zoo_areconfig(zhandle_t *zh, const char *joining, const char *leaving,
                         const char *members, int64_t version, data_completion_t dc,
                         const void *data);
ZOOAPI int zoo_aset(zhandle_t *zh, const char *path, const char *buffer, int buflen, int version,
                    stat_completion_t completion, const void *data);
ZOOAPI int zoo_aget_children(zhandle_t *zh, const char *path, int watch,
                             strings_completion_t completion, const void *data);
ZOOAPI int zoo_awget_children(zhandle_t *zh, const char *path, watcher_fn watcher,
                              void *watcherCtx, strings_completion_t completion, const void *data);
ZOOAPI int zoo_aget_children2(zhandle_t *zh, const char *path, int watch,
                              strings_stat_completion_t completion, const void *data);
ZOOAPI int zoo_awget_children2(zhandle_t *zh, const char *path, watcher_fn watcher,
                               void *watcherCtx, strings_stat_completion_t completion,
                               const void *data);
ZOOAPI int zoo_async(zhandle_t *zh, const char *path, string_completion_t completion,
                     const void *data);
ZOOAPI int zoo_aget_acl(zhandle_t *zh, const char *path, acl_completion_t completion,
                        const void *data);
ZOOAPI int zoo_aset_acl(zhandle_t *zh, const char *path, int version, struct ACL_vector *acl,
                        void_completion_t, const void *data);
ZOOAPI int zoo_amulti(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results,
                      void_completion_t, const void *data);

/* Text for a return code. */
ZOOAPI const char *zerror(int c);
/* Sends credentials; they are re-sent after every reconnect. */
ZOOAPI int zoo_add_auth(zhandle_t *zh, const char *scheme, const char *cert, int certLen,
                        void_completion_t completion, const void *data);
ZOOAPI int zoo_lock_auth(zhandle_t *zh);
ZOOAPI int zoo_unlock_auth(zhandle_t *zh);

ZOOAPI void zoo_set_debug_level(ZooLogLevel logLevel);
ZOOAPI void zoo_set_log_stream(FILE *logStream);
ZOOAPI log_callback_fn zoo_get_log_callback(const zhandle_t *zh);
ZOOAPI void zoo_set_log_callback(zhandle_t *zh, log_callback_fn callback);
/* Non-zero: later handles try servers in the order given instead of shuffling. */
ZOOAPI void zoo_deterministic_conn_order(int yesOrNo);

typedef enum {
    ZWATCHTYPE_CHILD = 1,
    ZWATCHTYPE_DATA = 2,
    ZWATCHTYPE_ANY = 3
} ZooWatcherType;

/* Removes one watcher (function and context). Apache declares the completion as a pointer to a
 * void_completion_t, but uses the value passed as the function itself; so does libzkrs.
 * ZNOWATCHER when no such watcher (or an unknown type). */
ZOOAPI int zoo_aremove_watches(zhandle_t *zh, const char *path, ZooWatcherType wtype,
                               watcher_fn watcher, void *watcherCtx, int local,
                               void_completion_t *completion, const void *data);
ZOOAPI int zoo_aremove_all_watches(zhandle_t *zh, const char *path, ZooWatcherType wtype,
                                   int local, void_completion_t *completion, const void *data);

/* libzkrs's additions (addWatch, getEphemerals, multiRead, getAllChildrenNumber, whoAmI) are
 * declared in zkrs_ext.h, generated from the Rust by cbindgen. */

#ifdef THREADED
/* ---- synchronous calls (mt library only): block until the result ---- */

ZOOAPI int zoo_create(zhandle_t *zh, const char *path, const char *value, int valuelen,
                      const struct ACL_vector *acl, int mode, char *path_buffer,
                      int path_buffer_len);
ZOOAPI int zoo_create_ttl(zhandle_t *zh, const char *path, const char *value, int valuelen,
                          const struct ACL_vector *acl, int mode, int64_t ttl, char *path_buffer,
                          int path_buffer_len);
ZOOAPI int zoo_create2(zhandle_t *zh, const char *path, const char *value, int valuelen,
                       const struct ACL_vector *acl, int mode, char *path_buffer,
                       int path_buffer_len, struct Stat *stat);
ZOOAPI int zoo_create2_ttl(zhandle_t *zh, const char *path, const char *value, int valuelen,
                           const struct ACL_vector *acl, int mode, int64_t ttl, char *path_buffer,
                           int path_buffer_len, struct Stat *stat);
ZOOAPI int zoo_delete(zhandle_t *zh, const char *path, int version);
ZOOAPI int zoo_exists(zhandle_t *zh, const char *path, int watch, struct Stat *stat);
ZOOAPI int zoo_wexists(zhandle_t *zh, const char *path, watcher_fn watcher, void *watcherCtx,
                       struct Stat *stat);
/* *buffer_len: capacity in; bytes copied out (silently truncated), -1 for null data. */
ZOOAPI int zoo_get(zhandle_t *zh, const char *path, int watch, char *buffer, int *buffer_len,
                   struct Stat *stat);
ZOOAPI int zoo_wget(zhandle_t *zh, const char *path, watcher_fn watcher, void *watcherCtx,
                    char *buffer, int *buffer_len, struct Stat *stat);
ZOOAPI int zoo_getconfig(zhandle_t *zh, int watch, char *buffer, int *buffer_len,
                         struct Stat *stat);
ZOOAPI int zoo_wgetconfig(zhandle_t *zh, watcher_fn watcher, void *watcherCtx, char *buffer,
                          int *buffer_len, struct Stat *stat);
ZOOAPI int zoo_reconfig(zhandle_t *zh, const char *joining, const char *leaving,
                        const char *members, int64_t version, char *buffer, int *buffer_len,
                        struct Stat *stat);
ZOOAPI int zoo_set(zhandle_t *zh, const char *path, const char *buffer, int buflen, int version);
ZOOAPI int zoo_set2(zhandle_t *zh, const char *path, const char *buffer, int buflen, int version,
                    struct Stat *stat);
ZOOAPI int zoo_get_children(zhandle_t *zh, const char *path, int watch,
                            struct String_vector *strings);
ZOOAPI int zoo_wget_children(zhandle_t *zh, const char *path, watcher_fn watcher,
                             void *watcherCtx, struct String_vector *strings);
ZOOAPI int zoo_get_children2(zhandle_t *zh, const char *path, int watch,
                             struct String_vector *strings, struct Stat *stat);
ZOOAPI int zoo_wget_children2(zhandle_t *zh, const char *path, watcher_fn watcher,
                              void *watcherCtx, struct String_vector *strings, struct Stat *stat);
ZOOAPI int zoo_get_acl(zhandle_t *zh, const char *path, struct ACL_vector *acl, struct Stat *stat);
ZOOAPI int zoo_set_acl(zhandle_t *zh, const char *path, int version, const struct ACL_vector *acl);
ZOOAPI int zoo_multi(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results);
ZOOAPI int zoo_remove_watches(zhandle_t *zh, const char *path, ZooWatcherType wtype,
                              watcher_fn watcher, void *watcherCtx, int local);
ZOOAPI int zoo_remove_all_watches(zhandle_t *zh, const char *path, ZooWatcherType wtype,
                                  int local);
#endif /* THREADED */

#ifdef __cplusplus
}
#endif

#endif /* ZOOKEEPER_H_ */
