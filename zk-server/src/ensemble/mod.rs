//! Running as a member of an ensemble: the election and quorum ports, their TLS and SASL, and
//! the sockets the driver runs for the node's replica (`crate::node`), which decides.

pub mod election_net;
pub mod peer_auth;
pub mod peer_net;
pub mod peer_tls;
pub mod peers;
pub mod settings;
