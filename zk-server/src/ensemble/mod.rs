//! Running as a member of an ensemble: the election and quorum ports at the edge, around
//! zk-quorum's state machines.

pub mod election;
pub mod election_net;
pub mod peer_auth;
pub mod peer_net;
pub mod peer_tls;
pub mod quorum;
pub mod settings;
