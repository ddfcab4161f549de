//! zk-server
