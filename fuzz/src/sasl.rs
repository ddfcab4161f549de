//! SASL DIGEST-MD5 tokens (zk-proto `digest_md5`, the SASL request's bytes from any client, and
//! a server's challenge as a client reads it) and JAAS files (zk-proto `jaas`, read at start-up).

use zk_proto::digest_md5::{ClientExchange, ClientStep, ServerExchange, ServerStep, SERVER_NAME};
use zk_proto::jaas::{system_properties, JaasConfig};

/// The first byte picks the decoder, the rest is its input:
/// - 0: a client's response to a server whose look-up knows no user: never a success, and the
///   exchange is over after it;
/// - 1: a client's response when every user's password is "pw": a success names a user the
///   response carries and answers with rspauth;
/// - 2: a server's challenge to a client: an answer is a response the same directives parser reads;
/// - 3: JAAS text: an error's line is within the text; a parse lists sections whose modules carry
///   control flags; and the JVM flags reader takes the same text without panicking.
pub fn token(data: &[u8]) {
    let Some((&which, input)) = data.split_first() else { return };
    match which % 4 {
        0 => {
            let mut s = ServerExchange::new(SERVER_NAME, &[1; 16]);
            s.step(b"", |_| None).expect("the challenge");
            assert!(s.step(input, |_| None).is_err(), "no user is known: nothing may authenticate");
            assert!(s.is_over());
        }
        1 => {
            let mut s = ServerExchange::new(SERVER_NAME, &[1; 16]);
            s.step(b"", |_| None).expect("the challenge");
            if let Ok(ServerStep::Success { username, token }) = s.step(input, |_| Some("pw".into())) {
                let text = String::from_utf8_lossy(input);
                assert!(text.contains(&username), "the user {username:?} is the response's");
                assert!(token.starts_with(b"rspauth="));
            }
            assert!(s.is_over());
        }
        2 => {
            let mut c = ClientExchange::new("bob", "pw", &[2; 16]);
            c.initial();
            if let Ok(ClientStep::Send(response)) = c.step(input) {
                let mut s = ServerExchange::new(SERVER_NAME, &[1; 16]);
                s.step(b"", |_| None).expect("the challenge");
                // A challenge with another nonce than this server's: the response is refused,
                // but parsed without panicking. (A fuzzer can learn the server's nonce, 16 bytes
                // of 1, from the comparisons; a response to it may then pass.)
                let verdict = s.step(&response, |_| Some("pw".into()));
                let own_nonce = format!("nonce=\"{}\"", "01".repeat(16));
                if !String::from_utf8_lossy(&response).contains(&own_nonce) {
                    assert!(verdict.is_err());
                }
            }
        }
        _ => {
            let text = String::from_utf8_lossy(input);
            match JaasConfig::parse(&text) {
                Ok(cfg) => {
                    for (_, modules) in &cfg.sections {
                        for m in modules {
                            assert!(["required", "requisite", "sufficient", "optional"]
                                .contains(&m.flag.as_str()));
                        }
                    }
                }
                Err((line, _)) => {
                    let lines = text.split('\n').count() as u32;
                    assert!(line >= 1 && line <= lines.max(1), "error line {line} of {lines}");
                }
            }
            for (k, _) in system_properties(&text) {
                assert!(!k.is_empty());
            }
        }
    }
}
