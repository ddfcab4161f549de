//! The client side of SASL GSSAPI (RFC 4752) as ZooKeeper runs it: GSS-API context tokens until
//! the context is established, then the server's wrapped security-layer offer, answered with "no
//! security layer", a maximum buffer of 0 and the authorization id.
//!
//! The GSS-API calls themselves are not made here: the core is handed a [`GssMechanism`] (the
//! `kerberos` feature's `zk_client::gssapi::Kerberos` over the system's MIT library, or a test's
//! scripted one) and asks it for a [`GssInitiator`] on each connection, so the exchange's order,
//! bounds and failures are deterministic and testable without a KDC.

use std::fmt;
use std::sync::Arc;

/// The largest GSS-API token taken from a server or from the mechanism (a Kerberos AP-REQ with a
/// large PAC is a few KiB; 64 KiB leaves room and bounds what the core copies).
pub const MAX_GSS_TOKEN: usize = 64 * 1024;
/// The largest authorization id sent in the security-layer answer.
pub const MAX_AUTHZID: usize = 1024;
/// RFC 4752's security-layer bit for "no security layer".
const LAYER_NONE: u8 = 0x01;

/// One GSS-API security context of an initiator (a client), for one connection.
pub trait GssInitiator: Send {
    /// `gss_init_sec_context`: `input` is `None` on the first call, then the server's token.
    /// Returns the token to send (empty when the library has none) and whether the context is
    /// now established.
    ///
    /// Errors: the library's message (no credentials, an unknown service principal, a server
    /// token it refuses).
    fn step(&mut self, input: Option<&[u8]>) -> Result<(Vec<u8>, bool), String>;
    /// `gss_unwrap` of a message from the server.
    ///
    /// Errors: the library's message (a message not made with this context).
    fn unwrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String>;
    /// `gss_wrap` (integrity only) of a message to the server.
    ///
    /// Errors: the library's message.
    fn wrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String>;
    /// The authorization id sent with the security-layer answer: the client's own principal, as
    /// Apache's Java client sends it (empty asks for none).
    fn authzid(&self) -> String;
}

/// Makes a [`GssInitiator`] for each connection.
pub trait GssMechanism: Send + Sync {
    /// A context for the server `host`, as the connect string names it (the mechanism builds
    /// the service principal from it, canonicalizing it if configured to).
    ///
    /// Errors: no usable credentials, a principal that does not parse (the library's message,
    /// with what was asked for).
    fn start(&self, host: &str) -> Result<Box<dyn GssInitiator>, String>;
    /// What this mechanism authenticates as, for logs and `Debug` (never a secret).
    fn describe(&self) -> String;
}

/// A [`GssMechanism`] a session authenticates with: clonable and printable, so it fits in
/// [`crate::core::Config`].
#[derive(Clone)]
pub struct Gssapi(pub Arc<dyn GssMechanism>);

impl fmt::Debug for Gssapi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Gssapi").field(&self.0.describe()).finish()
    }
}

/// What the exchange does after a server token.
#[derive(Debug, PartialEq, Eq)]
pub enum GssStep {
    /// Send this token (possibly empty) and wait for the server's answer.
    Send(Vec<u8>),
    /// The server accepted the exchange.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Context tokens go back and forth.
    Context,
    /// The context is established: the server's wrapped offer comes next.
    Layer,
    /// The answer to the offer went out: the server's reply ends the exchange.
    Answered,
    /// Over (done or failed): no token is taken.
    Over,
}

/// One client exchange on one connection.
pub struct GssExchange {
    ctx: Box<dyn GssInitiator>,
    stage: Stage,
}

impl fmt::Debug for GssExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GssExchange").field("stage", &self.stage).finish_non_exhaustive()
    }
}

fn bounded(what: &str, token: Vec<u8>) -> Result<Vec<u8>, String> {
    if token.len() > MAX_GSS_TOKEN {
        return Err(format!("{what} of {} bytes (at most {MAX_GSS_TOKEN})", token.len()));
    }
    Ok(token)
}

impl GssExchange {
    /// Starts the exchange on `ctx`: the first context token, to send in the first SASL packet.
    ///
    /// Errors: the library cannot make it (no ticket, an unknown service principal), or it is
    /// over [`MAX_GSS_TOKEN`].
    pub fn start(mut ctx: Box<dyn GssInitiator>) -> Result<(GssExchange, Vec<u8>), String> {
        let (token, established) = ctx.step(None)?;
        let token = bounded("the first context token", token)?;
        let stage = if established { Stage::Layer } else { Stage::Context };
        Ok((GssExchange { ctx, stage }, token))
    }

    /// Whether this side has sent its last token (the security-layer answer), as Java's
    /// `SaslClient.isComplete` says: only the server's verdict is left.
    pub fn is_complete(&self) -> bool {
        self.stage == Stage::Answered
    }

    /// Takes the server's token.
    ///
    /// Errors (the exchange is then over): a server token over [`MAX_GSS_TOKEN`]; a context
    /// token the library refuses; a security-layer offer that does not unwrap, is not 4 bytes or
    /// does not offer "no security layer"; a token after the end.
    pub fn step(&mut self, token: &[u8]) -> Result<GssStep, String> {
        let r = self.advance(token);
        if r.is_err() {
            self.stage = Stage::Over;
        }
        r
    }

    fn advance(&mut self, token: &[u8]) -> Result<GssStep, String> {
        if token.len() > MAX_GSS_TOKEN {
            return Err(format!("server token of {} bytes (at most {MAX_GSS_TOKEN})", token.len()));
        }
        match self.stage {
            Stage::Context => {
                let (out, established) = self.ctx.step(Some(token))?;
                let out = bounded("a context token", out)?;
                if established {
                    // The client's last context token, or an empty answer when the library has
                    // none: the server's offer follows either way.
                    self.stage = Stage::Layer;
                }
                Ok(GssStep::Send(out))
            }
            Stage::Layer => {
                let offer = self.ctx.unwrap(token)?;
                if offer.len() != 4 {
                    return Err(format!("security-layer offer of {} bytes (4 expected)", offer.len()));
                }
                if offer[0] & LAYER_NONE == 0 {
                    return Err(format!(
                        "the server offers security layers 0x{:02x} without 0x01 (none), the only one \
                         this client takes",
                        offer[0]
                    ));
                }
                let authzid = self.ctx.authzid();
                if authzid.len() > MAX_AUTHZID {
                    return Err(format!("authorization id of {} bytes", authzid.len()));
                }
                let mut answer = Vec::with_capacity(4 + authzid.len());
                // No security layer, and so no buffer size (0).
                answer.extend_from_slice(&[LAYER_NONE, 0, 0, 0]);
                answer.extend_from_slice(authzid.as_bytes());
                let wrapped = bounded("the security-layer answer", self.ctx.wrap(&answer)?)?;
                self.stage = Stage::Answered;
                Ok(GssStep::Send(wrapped))
            }
            Stage::Answered => {
                self.stage = Stage::Over;
                Ok(GssStep::Done)
            }
            Stage::Over => Err("SASL token after the exchange ended".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted context: `steps` answers to `step` in order; wrap and unwrap add and strip a
    /// marker byte.
    struct Scripted {
        steps: Vec<Result<(Vec<u8>, bool), String>>,
        seen: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    }

    impl GssInitiator for Scripted {
        fn step(&mut self, input: Option<&[u8]>) -> Result<(Vec<u8>, bool), String> {
            self.seen.lock().unwrap().push(input.map(<[u8]>::to_vec).unwrap_or_default());
            if self.steps.is_empty() {
                return Err("no more steps".into());
            }
            self.steps.remove(0)
        }
        fn unwrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
            msg.strip_prefix(b"W").map(<[u8]>::to_vec).ok_or_else(|| "not wrapped".to_string())
        }
        fn wrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
            Ok([b"W", msg].concat())
        }
        fn authzid(&self) -> String {
            "alice@ZKRS.TEST".into()
        }
    }

    fn scripted(steps: Vec<Result<(Vec<u8>, bool), String>>) -> Box<dyn GssInitiator> {
        Box::new(Scripted { steps, seen: Default::default() })
    }

    #[test]
    fn mutual_exchange_ends_with_no_layer_and_the_authzid() {
        let (mut x, first) =
            GssExchange::start(scripted(vec![Ok((b"ap-req".to_vec(), false)), Ok((vec![], true))])).unwrap();
        assert_eq!(first, b"ap-req");
        // The AP-REP establishes the context; nothing to send but the empty answer.
        assert_eq!(x.step(b"ap-rep").unwrap(), GssStep::Send(vec![]));
        assert!(!x.is_complete(), "the offer is still to come");
        let answer = x.step(b"W\x07\x00\x10\x00").unwrap();
        assert_eq!(answer, GssStep::Send(b"W\x01\x00\x00\x00alice@ZKRS.TEST".to_vec()));
        assert!(x.is_complete(), "only the server's verdict is left");
        assert_eq!(x.step(b"").unwrap(), GssStep::Done);
        assert!(x.step(b"").is_err(), "nothing after the end");
    }

    #[test]
    fn context_established_at_once_goes_to_the_offer() {
        let (mut x, first) = GssExchange::start(scripted(vec![Ok((b"t".to_vec(), true))])).unwrap();
        assert_eq!(first, b"t");
        assert!(matches!(x.step(b"W\x01\x00\x00\x00").unwrap(), GssStep::Send(_)));
    }

    #[test]
    fn refusals_end_the_exchange() {
        // No credentials: the library fails the first step.
        let e =
            GssExchange::start(scripted(vec![Err("No Kerberos credentials available".into())])).unwrap_err();
        assert!(e.contains("credentials"), "{e}");
        // An offer without "none".
        let (mut x, _) = GssExchange::start(scripted(vec![Ok((vec![1], true))])).unwrap();
        let e = x.step(b"W\x04\x00\x10\x00").unwrap_err();
        assert!(e.contains("0x04"), "{e}");
        assert!(x.step(b"W\x01\x00\x00\x00").is_err(), "failed for good");
        // An offer of the wrong size, one that does not unwrap.
        let (mut x, _) = GssExchange::start(scripted(vec![Ok((vec![1], true))])).unwrap();
        assert!(x.step(b"W\x01\x00\x00").unwrap_err().contains("3 bytes"));
        let (mut x, _) = GssExchange::start(scripted(vec![Ok((vec![1], true))])).unwrap();
        assert!(x.step(b"\x01\x00\x00\x00").unwrap_err().contains("not wrapped"));
        // A server token over the bound, and a context token the library refuses.
        let (mut x, _) = GssExchange::start(scripted(vec![Ok((vec![1], false))])).unwrap();
        assert!(x.step(&vec![0; MAX_GSS_TOKEN + 1]).unwrap_err().contains("at most"));
        let (mut x, _) = GssExchange::start(scripted(vec![Ok((vec![1], false)), Err("bad".into())])).unwrap();
        assert_eq!(x.step(b"x").unwrap_err(), "bad");
    }

    #[test]
    fn oversized_library_tokens_are_refused() {
        let e = GssExchange::start(scripted(vec![Ok((vec![0; MAX_GSS_TOKEN + 1], false))])).unwrap_err();
        assert!(e.contains("first context token"), "{e}");
    }
}
