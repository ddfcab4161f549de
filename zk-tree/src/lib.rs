//! placeholder until the tree lands
