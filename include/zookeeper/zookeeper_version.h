/* zkrs: the Apache ZooKeeper release whose C client API libzkrs implements. */
#ifndef ZOOKEEPER_VERSION_H_
#define ZOOKEEPER_VERSION_H_

#define ZOO_VERSION "3.8.0"

/* libzkrs adds these: the C API level it follows, split up. */
#define ZOO_MAJOR_VERSION 3
#define ZOO_MINOR_VERSION 8
#define ZOO_PATCH_VERSION 0

#endif
