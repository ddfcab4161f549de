/* zkrs: ZooKeeper request opcodes and the xids the protocol reserves, as Apache's proto.h names
 * them (values are the wire protocol's). */
#ifndef PROTO_H_
#define PROTO_H_

#ifdef __cplusplus
extern "C" {
#endif

#define ZOO_NOTIFY_OP 0
#define ZOO_CREATE_OP 1
#define ZOO_DELETE_OP 2
#define ZOO_EXISTS_OP 3
#define ZOO_GETDATA_OP 4
#define ZOO_SETDATA_OP 5
#define ZOO_GETACL_OP 6
#define ZOO_SETACL_OP 7
#define ZOO_GETCHILDREN_OP 8
#define ZOO_SYNC_OP 9
#define ZOO_PING_OP 11
#define ZOO_GETCHILDREN2_OP 12
#define ZOO_CHECK_OP 13
#define ZOO_MULTI_OP 14
#define ZOO_CREATE2_OP 15
#define ZOO_RECONFIG_OP 16
#define ZOO_CHECK_WATCHES 17
#define ZOO_REMOVE_WATCHES 18
#define ZOO_CREATE_CONTAINER_OP 19
#define ZOO_DELETE_CONTAINER_OP 20
#define ZOO_CREATE_TTL_OP 21
#define ZOO_CLOSE_OP -11
#define ZOO_SETAUTH_OP 100
#define ZOO_SETWATCHES_OP 101
#define ZOO_SASL_OP 102
/* Added by zkrs: the 3.6+ operations the Apache C client does not name. */
#define ZOO_MULTI_READ_OP 22
#define ZOO_ADD_WATCH_OP 106
#define ZOO_GET_EPHEMERALS_OP 103
#define ZOO_GET_ALL_CHILDREN_NUMBER_OP 104
#define ZOO_SETWATCHES2_OP 105
#define ZOO_WHOAMI_OP 107

#ifdef __cplusplus
}
#endif

#endif
