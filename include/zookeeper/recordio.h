/* zkrs: the jute buffer type and the memory helpers that go with the generated records
 * (zookeeper.jute.h). libzkrs does not export Apache's archive (serializer) API. */
#ifndef __RECORDIO_H__
#define __RECORDIO_H__

#include <sys/types.h>
#include <stdint.h>

#ifndef ZOOAPI
#define ZOOAPI
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A length-prefixed byte array; len -1 stands for null data. */
struct buffer {
    int32_t len;
    char *buff;
};

/* Frees *s (libc free) and sets it to NULL. */
void deallocate_String(char **s);
/* Frees b->buff and sets it to NULL. */
void deallocate_Buffer(struct buffer *b);

/* Host-to-network byte order for 64-bit values (its own inverse). */
int64_t zoo_htonll(int64_t v);

#ifdef __cplusplus
}
#endif

#endif
