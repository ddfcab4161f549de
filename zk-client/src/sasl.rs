//! Making SASL credentials: the one place zk-client draws randomness from the operating system,
//! kept out of the sans-IO core, which is handed the key.

use crate::core::SaslCredentials;
use rand::RngCore;

impl SaslCredentials {
    /// Credentials for `username` and `password`, with a fresh nonce key from the operating
    /// system's CSPRNG.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> SaslCredentials {
        let mut nonce_key = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut nonce_key);
        SaslCredentials { username: username.into(), password: password.into(), nonce_key }
    }
}
