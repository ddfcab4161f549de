//! The numbers ZooKeeper puts on the wire: opcodes, error codes, create modes, watch enums, permissions.

/// Declares a `#[repr(i32)]` enum with a checked conversion from the wire value.
macro_rules! wire_enum {
    ($(#[$m:meta])* pub enum $name:ident { $( $(#[$vm:meta])* $v:ident = $n:expr ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i32)]
        pub enum $name { $( $(#[$vm])* $v = $n ),* }

        impl $name {
            /// The enum value for a wire integer, if there is one.
            pub fn from_i32(n: i32) -> Option<Self> {
                match n { $( $n => Some(Self::$v), )* _ => None }
            }
            /// The wire integer.
            pub fn code(self) -> i32 {
                self as i32
            }
        }
    };
}

wire_enum! {
    /// Request and transaction types (`ZooDefs.OpCode`).
    pub enum OpCode {
        /// Watch notification, server to client.
        Notification = 0,
        /// Create a znode.
        Create = 1,
        /// Delete a znode.
        Delete = 2,
        /// Stat a znode, optionally watching for its creation or change.
        Exists = 3,
        /// Read data and stat.
        GetData = 4,
        /// Write data.
        SetData = 5,
        /// Read the ACL.
        GetAcl = 6,
        /// Replace the ACL.
        SetAcl = 7,
        /// List children.
        GetChildren = 8,
        /// Flush the leader channel for a path.
        Sync = 9,
        /// Session keep-alive.
        Ping = 11,
        /// List children with the parent's stat.
        GetChildren2 = 12,
        /// Version check (multi only).
        Check = 13,
        /// Atomic write batch.
        Multi = 14,
        /// Create returning the new node's stat.
        Create2 = 15,
        /// Dynamic reconfiguration.
        Reconfig = 16,
        /// Ask whether a watch is set.
        CheckWatches = 17,
        /// Remove watches.
        RemoveWatches = 18,
        /// Create a container node.
        CreateContainer = 19,
        /// Delete an empty container (server internal).
        DeleteContainer = 20,
        /// Create a node with a time to live.
        CreateTtl = 21,
        /// Batch of reads.
        MultiRead = 22,
        /// Add authentication.
        Auth = 100,
        /// Re-register watches after reconnect.
        SetWatches = 101,
        /// SASL token exchange.
        Sasl = 102,
        /// List a session's ephemerals.
        GetEphemerals = 103,
        /// Count all descendants.
        GetAllChildrenNumber = 104,
        /// Re-register watches including persistent ones.
        SetWatches2 = 105,
        /// Add a persistent or persistent-recursive watch.
        AddWatch = 106,
        /// Report the caller's authenticated identities.
        WhoAmI = 107,
        /// Session creation (transaction type).
        CreateSession = -10,
        /// Session close (request and transaction type).
        CloseSession = -11,
        /// A failed write (transaction type).
        Error = -1,
    }
}

impl OpCode {
    /// Whether this opcode changes state and therefore becomes a transaction.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            OpCode::Create
                | OpCode::Create2
                | OpCode::CreateContainer
                | OpCode::CreateTtl
                | OpCode::Delete
                | OpCode::DeleteContainer
                | OpCode::SetData
                | OpCode::SetAcl
                | OpCode::Check
                | OpCode::Multi
                | OpCode::Reconfig
                | OpCode::CreateSession
                | OpCode::CloseSession
        )
    }
}

wire_enum! {
    /// Result codes (`KeeperException.Code`).
    pub enum ErrorCode {
        /// Success.
        Ok = 0,
        /// A server error.
        SystemError = -1,
        /// State is inconsistent (also: multi ops after the failing one).
        RuntimeInconsistency = -2,
        /// Data is inconsistent.
        DataInconsistency = -3,
        /// Connection lost.
        ConnectionLoss = -4,
        /// Request could not be (de)serialized.
        MarshallingError = -5,
        /// Operation not implemented.
        Unimplemented = -6,
        /// Operation timed out.
        OperationTimeout = -7,
        /// Invalid arguments.
        BadArguments = -8,
        /// Unknown session.
        UnknownSession = -12,
        /// Reconfig would leave no quorum.
        NewConfigNoQuorum = -13,
        /// Another reconfig is running.
        ReconfigInProgress = -14,
        /// API error.
        ApiError = -100,
        /// No such node.
        NoNode = -101,
        /// Not authorised.
        NoAuth = -102,
        /// Version mismatch.
        BadVersion = -103,
        /// Ephemerals cannot have children.
        NoChildrenForEphemerals = -108,
        /// Node already exists.
        NodeExists = -110,
        /// Node has children.
        NotEmpty = -111,
        /// Session expired.
        SessionExpired = -112,
        /// Invalid callback.
        InvalidCallback = -113,
        /// Invalid ACL.
        InvalidAcl = -114,
        /// Authentication failed.
        AuthFailed = -115,
        /// Session moved to another server.
        SessionMoved = -118,
        /// Server is read-only.
        NotReadOnly = -119,
        /// Ephemeral on a local session.
        EphemeralOnLocalSession = -120,
        /// No such watcher.
        NoWatcher = -121,
        /// Request timed out.
        RequestTimeout = -122,
        /// Reconfig is disabled.
        ReconfigDisabled = -123,
        /// Session closed because SASL is required.
        SessionClosedRequireSaslAuth = -124,
        /// Quota exceeded.
        QuotaExceeded = -125,
        /// Operation throttled.
        ThrottledOp = -127,
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} ({})", self, self.code())
    }
}

wire_enum! {
    /// Create flags (`CreateMode`).
    pub enum CreateMode {
        /// Persistent node.
        Persistent = 0,
        /// Deleted when the creating session ends.
        Ephemeral = 1,
        /// Persistent with a sequence suffix.
        PersistentSequential = 2,
        /// Ephemeral with a sequence suffix.
        EphemeralSequential = 3,
        /// Deleted once its last child goes.
        Container = 4,
        /// Deleted after its TTL when childless and unmodified.
        PersistentWithTtl = 5,
        /// TTL node with a sequence suffix.
        PersistentSequentialWithTtl = 6,
    }
}

impl CreateMode {
    /// Whether the node belongs to a session.
    pub fn is_ephemeral(self) -> bool {
        matches!(self, CreateMode::Ephemeral | CreateMode::EphemeralSequential)
    }
    /// Whether a sequence suffix is appended.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }
    /// Whether the node is a container.
    pub fn is_container(self) -> bool {
        self == CreateMode::Container
    }
    /// Whether the node has a TTL.
    pub fn is_ttl(self) -> bool {
        matches!(self, CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl)
    }
}

wire_enum! {
    /// Watch event types (`Watcher.Event.EventType`).
    pub enum EventType {
        /// A session state change.
        None = -1,
        /// The node was created.
        NodeCreated = 1,
        /// The node was deleted.
        NodeDeleted = 2,
        /// The node's data changed.
        NodeDataChanged = 3,
        /// The node's children changed.
        NodeChildrenChanged = 4,
        /// A data watch was removed.
        DataWatchRemoved = 5,
        /// A child watch was removed.
        ChildWatchRemoved = 6,
        /// A persistent watch was removed.
        PersistentWatchRemoved = 7,
    }
}

wire_enum! {
    /// Session states carried in watch events (`Watcher.Event.KeeperState`).
    pub enum KeeperState {
        /// Disconnected from the server.
        Disconnected = 0,
        /// Connected.
        SyncConnected = 3,
        /// Authentication failed.
        AuthFailed = 4,
        /// Connected to a read-only server.
        ConnectedReadOnly = 5,
        /// SASL authenticated.
        SaslAuthenticated = 6,
        /// Session expired.
        Expired = -112,
        /// Client closed.
        Closed = 7,
    }
}

wire_enum! {
    /// Which watches checkWatches/removeWatches address (`Watcher.WatcherType`).
    pub enum WatcherType {
        /// Child watches.
        Children = 1,
        /// Data and exist watches.
        Data = 2,
        /// All watches.
        Any = 3,
        /// Persistent watches.
        Persistent = 4,
        /// Persistent-recursive watches.
        PersistentRecursive = 5,
    }
}

wire_enum! {
    /// addWatch modes (`AddWatchMode`).
    pub enum AddWatchMode {
        /// Persistent watch on one node.
        Persistent = 0,
        /// Persistent watch on a node and all its descendants.
        PersistentRecursive = 1,
    }
}

/// ACL permission bits (`ZooDefs.Perms`).
pub mod perms {
    /// Read data and list children.
    pub const READ: i32 = 1;
    /// Write data.
    pub const WRITE: i32 = 2;
    /// Create children.
    pub const CREATE: i32 = 4;
    /// Delete children.
    pub const DELETE: i32 = 8;
    /// Set the ACL.
    pub const ADMIN: i32 = 16;
    /// All of the above.
    pub const ALL: i32 = 31;
}

/// Special xids used by the protocol.
pub mod xid {
    /// Watch notification.
    pub const NOTIFICATION: i32 = -1;
    /// Ping.
    pub const PING: i32 = -2;
    /// Auth packet.
    pub const AUTH: i32 = -4;
    /// setWatches / setWatches2.
    pub const SET_WATCHES: i32 = -8;
}
