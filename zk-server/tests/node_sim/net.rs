//! The simulated network: quorum connections as pairs of FIFO pipes (TCP: in order, nothing
//! lost, held while a partition separates the ends), and the election port as one mailbox per
//! (sender, receiver) that keeps only the newest notification, as zk-server's election port does.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use zk_quorum::wire::{Notification, QuorumPacket};
use zk_server::node::PeerConn;

/// What travels on a quorum connection.
#[derive(Debug)]
pub enum Msg {
    /// A packet.
    Packet(QuorumPacket),
    /// Raw snapshot stream bytes.
    Raw(Bytes),
    /// The sender closed (or crashed): the reader sees the end of the stream.
    Close(String),
}

/// One end of a connection: the server, its process generation, and its number for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    pub sid: i64,
    pub gen: u64,
    pub conn: PeerConn,
}

/// A quorum connection: end 0 dialled, end 1 accepted.
#[derive(Debug)]
pub struct Link {
    pub ends: [End; 2],
    /// Messages from end i to the other, oldest first.
    pub pipes: [VecDeque<Msg>; 2],
    /// Whether end i still reads (it has not closed, crashed, or seen the other's close).
    pub open: [bool; 2],
    /// The accepting end was admitted by its node (its reads start then).
    pub admitted: bool,
    /// End i asked to hear when its outgoing pipe is empty.
    pub drain_watch: [bool; 2],
    /// A delivery is scheduled for pipe i.
    pub scheduled: [bool; 2],
}

impl Link {
    /// The index of the end that is `sid`'s connection `conn`.
    pub fn end_of(&self, sid: i64, conn: PeerConn) -> Option<usize> {
        (0..2).find(|&i| self.ends[i].sid == sid && self.ends[i].conn == conn)
    }
}

/// The network's state.
#[derive(Debug, Default)]
pub struct Net {
    pub links: BTreeMap<u64, Link>,
    next_link: u64,
    /// Election mailboxes: (from, to) -> the newest notification not yet delivered, with the
    /// sender's generation.
    pub mail: BTreeMap<(i64, i64), (Notification, u64)>,
    /// Mailboxes with a delivery scheduled.
    pub mail_scheduled: BTreeSet<(i64, i64)>,
    /// Partition: the servers in `side` can reach each other and not the rest, and the
    /// reverse; None: everyone reaches everyone.
    pub side: Option<BTreeSet<i64>>,
}

impl Net {
    /// Whether `a` and `b` can reach each other now.
    pub fn reachable(&self, a: i64, b: i64) -> bool {
        match &self.side {
            None => true,
            Some(s) => s.contains(&a) == s.contains(&b),
        }
    }

    /// A new connection between the dialler and the acceptor; returns its id.
    pub fn connect(&mut self, dialler: End, acceptor: End) -> u64 {
        let id = self.next_link;
        self.next_link += 1;
        self.links.insert(
            id,
            Link {
                ends: [dialler, acceptor],
                pipes: [VecDeque::new(), VecDeque::new()],
                open: [true, true],
                admitted: false,
                drain_watch: [false, false],
                scheduled: [false, false],
            },
        );
        id
    }

    /// The link and end index of `sid`'s connection `conn` (of its generation `gen`).
    pub fn find(&self, sid: i64, gen: u64, conn: PeerConn) -> Option<(u64, usize)> {
        self.links.iter().find_map(|(id, l)| {
            let i = l.end_of(sid, conn)?;
            (l.ends[i].gen == gen && l.open[i]).then_some((*id, i))
        })
    }

    /// Every open end of `sid`'s process `gen`, as (link, end).
    pub fn ends_of(&self, sid: i64, gen: u64) -> Vec<(u64, usize)> {
        let mut v = Vec::new();
        for (id, l) in &self.links {
            for i in 0..2 {
                if l.ends[i].sid == sid && l.ends[i].gen == gen && l.open[i] {
                    v.push((*id, i));
                }
            }
        }
        v
    }

    /// Forgets links nobody reads any more.
    pub fn gc(&mut self) {
        self.links.retain(|_, l| l.open[0] || l.open[1] || !l.pipes[0].is_empty() || !l.pipes[1].is_empty());
    }
}
