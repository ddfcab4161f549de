/* Prints sizeof and offsetof of the ABI structs as Apache's header defines them. */
#include <zookeeper/zookeeper.h>
#include <stddef.h>
#include <stdio.h>
#define S(t) printf("sizeof %s %zu\n", #t, sizeof(t))
#define O(t, f) printf("offsetof %s.%s %zu\n", #t, #f, offsetof(t, f))
int main(void) {
    S(struct Stat); O(struct Stat, czxid); O(struct Stat, mzxid); O(struct Stat, ctime); O(struct Stat, mtime);
    O(struct Stat, version); O(struct Stat, cversion); O(struct Stat, aversion); O(struct Stat, ephemeralOwner);
    O(struct Stat, dataLength); O(struct Stat, numChildren); O(struct Stat, pzxid);
    S(struct Id); O(struct Id, scheme); O(struct Id, id);
    S(struct ACL); O(struct ACL, perms); O(struct ACL, id);
    S(struct ACL_vector); O(struct ACL_vector, count); O(struct ACL_vector, data);
    S(struct String_vector); O(struct String_vector, count); O(struct String_vector, data);
    S(struct buffer); O(struct buffer, len); O(struct buffer, buff);
    S(struct ClientInfo); S(struct ClientInfo_vector); S(struct Id_vector); S(struct StatPersisted);
    S(clientid_t); O(clientid_t, client_id); O(clientid_t, passwd);
    S(zoo_op_t); O(zoo_op_t, type); O(zoo_op_t, create_op.path); O(zoo_op_t, create_op.data);
    O(zoo_op_t, create_op.datalen); O(zoo_op_t, create_op.buf); O(zoo_op_t, create_op.buflen);
    O(zoo_op_t, create_op.acl); O(zoo_op_t, create_op.flags); O(zoo_op_t, create_op.ttl);
    O(zoo_op_t, delete_op.version); O(zoo_op_t, set_op.data); O(zoo_op_t, set_op.datalen);
    O(zoo_op_t, set_op.version); O(zoo_op_t, set_op.stat); O(zoo_op_t, check_op.version);
    S(zoo_op_result_t); O(zoo_op_result_t, err); O(zoo_op_result_t, value); O(zoo_op_result_t, valuelen);
    O(zoo_op_result_t, stat);
    return 0;
}
