//! Typed errors, one variant per ZooKeeper error code.

use zk_proto::ErrorCode;

macro_rules! errors {
    ($( $(#[$m:meta])* $v:ident = $msg:literal ),* $(,)?) => {
        /// A ZooKeeper error: each variant is exactly one of ZooKeeper's error codes
        /// ([`Error::code`] gives the number, `From<ErrorCode>` the other way).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
        pub enum Error {
            $( $(#[$m])* #[error($msg)] $v, )*
        }

        impl Error {
            /// The ZooKeeper code.
            pub fn code(self) -> ErrorCode {
                match self { $( Error::$v => ErrorCode::$v, )* }
            }
        }

        impl From<ErrorCode> for Error {
            /// OK is not an error; it maps to SYSTEMERROR, which no caller should ever see.
            fn from(c: ErrorCode) -> Error {
                match c {
                    ErrorCode::Ok => Error::SystemError,
                    $( ErrorCode::$v => Error::$v, )*
                }
            }
        }
    };
}

errors! {
    /// SYSTEMERROR (-1).
    SystemError = "system error",
    /// RUNTIMEINCONSISTENCY (-2): a multi op after the one that failed.
    RuntimeInconsistency = "runtime inconsistency",
    /// DATAINCONSISTENCY (-3).
    DataInconsistency = "data inconsistency",
    /// CONNECTIONLOSS (-4): the connection dropped; the operation may or may not have happened.
    ConnectionLoss = "connection loss",
    /// MARSHALLINGERROR (-5): a reply could not be decoded.
    MarshallingError = "marshalling error",
    /// UNIMPLEMENTED (-6).
    Unimplemented = "unimplemented",
    /// OPERATIONTIMEOUT (-7).
    OperationTimeout = "operation timeout",
    /// BADARGUMENTS (-8): also a path or connect string this client refuses before sending.
    BadArguments = "bad arguments",
    /// UNKNOWNSESSION (-12).
    UnknownSession = "unknown session",
    /// NEWCONFIGNOQUORUM (-13).
    NewConfigNoQuorum = "new config has no quorum",
    /// RECONFIGINPROGRESS (-14).
    ReconfigInProgress = "reconfig in progress",
    /// APIERROR (-100).
    ApiError = "api error",
    /// NONODE (-101).
    NoNode = "no node",
    /// NOAUTH (-102).
    NoAuth = "not authorized",
    /// BADVERSION (-103).
    BadVersion = "bad version",
    /// NOCHILDRENFOREPHEMERALS (-108).
    NoChildrenForEphemerals = "ephemeral nodes may not have children",
    /// NODEEXISTS (-110).
    NodeExists = "node exists",
    /// NOTEMPTY (-111).
    NotEmpty = "node has children",
    /// SESSIONEXPIRED (-112): the session is gone; its ephemerals and watches too.
    SessionExpired = "session expired",
    /// INVALIDCALLBACK (-113).
    InvalidCallback = "invalid callback",
    /// INVALIDACL (-114).
    InvalidAcl = "invalid ACL",
    /// AUTHFAILED (-115).
    AuthFailed = "authentication failed",
    /// SESSIONMOVED (-118).
    SessionMoved = "session moved",
    /// NOTREADONLY (-119): a write sent to a read-only server.
    NotReadOnly = "server is read-only",
    /// EPHEMERALONLOCALSESSION (-120).
    EphemeralOnLocalSession = "ephemeral on local session",
    /// NOWATCHER (-121).
    NoWatcher = "no such watcher",
    /// REQUESTTIMEOUT (-122).
    RequestTimeout = "request timeout",
    /// RECONFIGDISABLED (-123).
    ReconfigDisabled = "reconfig disabled",
    /// SESSIONCLOSEDREQUIRESASLAUTH (-124).
    SessionClosedRequireSaslAuth = "session closed: SASL authentication required",
    /// QUOTAEXCEEDED (-125).
    QuotaExceeded = "quota exceeded",
    /// THROTTLEDOP (-127).
    ThrottledOp = "operation throttled",
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
