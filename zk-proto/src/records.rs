//! Every record of `zookeeper.jute` that clients and servers exchange, field for field in wire order.

use crate::record;
use bytes::Bytes;

record! {
    /// An identity: an auth scheme and the id within it.
    pub struct Id {
        /// Scheme: world, auth, digest, ip, x509, sasl, super.
        pub scheme: String,
        /// Scheme-specific id.
        pub id: String,
    }
}

record! {
    /// One ACL entry: permission bits granted to an identity.
    pub struct Acl {
        /// Bitwise OR of [`crate::perms`].
        pub perms: i32,
        /// Who is granted them.
        pub id: Id,
    }
}

record! {
    /// A znode's metadata as clients see it.
    pub struct Stat {
        /// Zxid of the create.
        pub czxid: i64,
        /// Zxid of the last data change.
        pub mzxid: i64,
        /// Creation time, ms since the epoch.
        pub ctime: i64,
        /// Last data change time, ms since the epoch.
        pub mtime: i64,
        /// Data version.
        pub version: i32,
        /// Child version.
        pub cversion: i32,
        /// ACL version.
        pub aversion: i32,
        /// Owning session for ephemerals, 0 otherwise.
        pub ephemeral_owner: i64,
        /// Data length in bytes.
        pub data_length: i32,
        /// Number of children.
        pub num_children: i32,
        /// Zxid of the last child create or delete.
        pub pzxid: i64,
    }
}

record! {
    /// A znode's metadata as stored in snapshots.
    pub struct StatPersisted {
        /// Zxid of the create.
        pub czxid: i64,
        /// Zxid of the last data change.
        pub mzxid: i64,
        /// Creation time.
        pub ctime: i64,
        /// Last data change time.
        pub mtime: i64,
        /// Data version.
        pub version: i32,
        /// Stored child version (counts creates).
        pub cversion: i32,
        /// ACL version.
        pub aversion: i32,
        /// Owner word: session id, container or TTL marker.
        pub ephemeral_owner: i64,
        /// Zxid of the last child create or delete.
        pub pzxid: i64,
    }
}

record! {
    /// One authenticated identity reported by whoAmI.
    pub struct ClientInfo {
        /// Auth scheme.
        pub auth_scheme: String,
        /// User within the scheme.
        pub user: String,
    }
}

record! {
    /// Header of every request after the handshake.
    pub struct RequestHeader {
        /// Client-chosen id echoed in the reply (or a special xid).
        pub xid: i32,
        /// Opcode.
        pub op: i32,
    }
}

record! {
    /// Header of every reply and notification.
    pub struct ReplyHeader {
        /// The request's xid.
        pub xid: i32,
        /// Last zxid the server processed.
        pub zxid: i64,
        /// Error code, 0 on success.
        pub err: i32,
    }
}

record! {
    /// Header before each op of a multi request or response.
    pub struct MultiHeader {
        /// Opcode of the op, -1 for an error result or the end marker.
        pub op: i32,
        /// True on the end marker.
        pub done: bool,
        /// Error code (results), -1 in requests.
        pub err: i32,
    }
}

record! {
    /// Authentication request.
    pub struct AuthPacket {
        /// Unused by servers; 0.
        pub auth_type: i32,
        /// Scheme.
        pub scheme: String,
        /// Credentials.
        pub auth: Bytes,
    }
}

record! {
    /// Watch re-registration after reconnect.
    pub struct SetWatches {
        /// Last zxid the client saw.
        pub relative_zxid: i64,
        /// Data watch paths.
        pub data_watches: Vec<String>,
        /// Exist watch paths.
        pub exist_watches: Vec<String>,
        /// Child watch paths.
        pub child_watches: Vec<String>,
    }
}

record! {
    /// Watch re-registration including persistent watches.
    pub struct SetWatches2 {
        /// Last zxid the client saw.
        pub relative_zxid: i64,
        /// Data watch paths.
        pub data_watches: Vec<String>,
        /// Exist watch paths.
        pub exist_watches: Vec<String>,
        /// Child watch paths.
        pub child_watches: Vec<String>,
        /// Persistent watch paths.
        pub persistent_watches: Vec<String>,
        /// Persistent-recursive watch paths.
        pub persistent_recursive_watches: Vec<String>,
    }
}

record! {
    /// getData.
    pub struct GetDataRequest {
        /// Path.
        pub path: String,
        /// Leave a data watch.
        pub watch: bool,
    }
}

record! {
    /// setData.
    pub struct SetDataRequest {
        /// Path.
        pub path: String,
        /// New data (null kept apart from empty).
        pub data: Option<Bytes>,
        /// Expected version, -1 for any.
        pub version: i32,
    }
}

record! {
    /// reconfig.
    pub struct ReconfigRequest {
        /// Servers to add.
        pub joining_servers: Option<String>,
        /// Servers to remove.
        pub leaving_servers: Option<String>,
        /// Whole new membership.
        pub new_members: Option<String>,
        /// Expected config version, -1 for any.
        pub cur_config_id: i64,
    }
}

record! {
    /// setData reply.
    pub struct SetDataResponse {
        /// Stat after the write.
        pub stat: Stat,
    }
}

record! {
    /// SASL token request.
    pub struct GetSaslRequest {
        /// Token.
        pub token: Bytes,
    }
}

record! {
    /// SASL token.
    pub struct SetSaslRequest {
        /// Token.
        pub token: Bytes,
    }
}

record! {
    /// SASL token reply.
    pub struct SetSaslResponse {
        /// Token.
        pub token: Bytes,
    }
}

record! {
    /// create, create2 and createContainer.
    pub struct CreateRequest {
        /// Path (prefix for sequential nodes).
        pub path: String,
        /// Data.
        pub data: Option<Bytes>,
        /// ACL.
        pub acl: Vec<Acl>,
        /// Create mode.
        pub flags: i32,
    }
}

record! {
    /// createTTL.
    pub struct CreateTtlRequest {
        /// Path.
        pub path: String,
        /// Data.
        pub data: Option<Bytes>,
        /// ACL.
        pub acl: Vec<Acl>,
        /// Create mode.
        pub flags: i32,
        /// Time to live, ms.
        pub ttl: i64,
    }
}

record! {
    /// delete.
    pub struct DeleteRequest {
        /// Path.
        pub path: String,
        /// Expected version, -1 for any.
        pub version: i32,
    }
}

record! {
    /// getChildren.
    pub struct GetChildrenRequest {
        /// Path.
        pub path: String,
        /// Leave a child watch.
        pub watch: bool,
    }
}

record! {
    /// getAllChildrenNumber.
    pub struct GetAllChildrenNumberRequest {
        /// Path.
        pub path: String,
    }
}

record! {
    /// getChildren2.
    pub struct GetChildren2Request {
        /// Path.
        pub path: String,
        /// Leave a child watch.
        pub watch: bool,
    }
}

record! {
    /// check (multi only).
    pub struct CheckVersionRequest {
        /// Path.
        pub path: String,
        /// Expected version.
        pub version: i32,
    }
}

record! {
    /// Legacy quota request.
    pub struct GetMaxChildrenRequest {
        /// Path.
        pub path: String,
    }
}

record! {
    /// Legacy quota reply.
    pub struct GetMaxChildrenResponse {
        /// Max children.
        pub max: i32,
    }
}

record! {
    /// sync.
    pub struct SyncRequest {
        /// Path.
        pub path: String,
    }
}

record! {
    /// sync reply.
    pub struct SyncResponse {
        /// Path.
        pub path: String,
    }
}

record! {
    /// getACL.
    pub struct GetAclRequest {
        /// Path.
        pub path: String,
    }
}

record! {
    /// setACL.
    pub struct SetAclRequest {
        /// Path.
        pub path: String,
        /// New ACL.
        pub acl: Vec<Acl>,
        /// Expected ACL version, -1 for any.
        pub version: i32,
    }
}

record! {
    /// setACL reply.
    pub struct SetAclResponse {
        /// Stat after the write.
        pub stat: Stat,
    }
}

record! {
    /// addWatch.
    pub struct AddWatchRequest {
        /// Path.
        pub path: String,
        /// [`crate::AddWatchMode`].
        pub mode: i32,
    }
}

record! {
    /// A watch notification's body.
    pub struct WatcherEvent {
        /// [`crate::EventType`].
        pub event_type: i32,
        /// [`crate::KeeperState`].
        pub state: i32,
        /// Path (chroot-relative on the client).
        pub path: String,
    }
}

record! {
    /// Error result inside a multi reply.
    pub struct ErrorResponse {
        /// Error code.
        pub err: i32,
    }
}

record! {
    /// create reply.
    pub struct CreateResponse {
        /// Actual path (with sequence suffix).
        pub path: String,
    }
}

record! {
    /// create2 / createContainer / createTTL reply.
    pub struct Create2Response {
        /// Actual path.
        pub path: String,
        /// Stat of the new node.
        pub stat: Stat,
    }
}

record! {
    /// exists.
    pub struct ExistsRequest {
        /// Path.
        pub path: String,
        /// Leave a watch (exist watch if absent, data watch if present).
        pub watch: bool,
    }
}

record! {
    /// exists reply.
    pub struct ExistsResponse {
        /// Stat.
        pub stat: Stat,
    }
}

record! {
    /// getData reply.
    pub struct GetDataResponse {
        /// Data (null kept apart from empty).
        pub data: Option<Bytes>,
        /// Stat.
        pub stat: Stat,
    }
}

record! {
    /// getChildren reply.
    pub struct GetChildrenResponse {
        /// Child names.
        pub children: Vec<String>,
    }
}

record! {
    /// getAllChildrenNumber reply.
    pub struct GetAllChildrenNumberResponse {
        /// Number of descendants.
        pub total_number: i32,
    }
}

record! {
    /// getChildren2 reply.
    pub struct GetChildren2Response {
        /// Child names.
        pub children: Vec<String>,
        /// Parent's stat.
        pub stat: Stat,
    }
}

record! {
    /// getACL reply.
    pub struct GetAclResponse {
        /// ACL.
        pub acl: Vec<Acl>,
        /// Stat.
        pub stat: Stat,
    }
}

record! {
    /// checkWatches.
    pub struct CheckWatchesRequest {
        /// Path.
        pub path: String,
        /// [`crate::WatcherType`].
        pub watcher_type: i32,
    }
}

record! {
    /// removeWatches.
    pub struct RemoveWatchesRequest {
        /// Path.
        pub path: String,
        /// [`crate::WatcherType`].
        pub watcher_type: i32,
    }
}

record! {
    /// getEphemerals.
    pub struct GetEphemeralsRequest {
        /// Only paths starting with this prefix.
        pub prefix_path: String,
    }
}

record! {
    /// getEphemerals reply.
    pub struct GetEphemeralsResponse {
        /// Ephemeral paths of the session.
        pub ephemerals: Vec<String>,
    }
}

record! {
    /// whoAmI reply.
    pub struct WhoAmIResponse {
        /// Identities of the caller.
        pub client_info: Vec<ClientInfo>,
    }
}
