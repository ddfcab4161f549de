//! The in-memory server model: the log is a list of records (a prefix of them durable), the
//! snapshot a durable history prefix, the database the list of applied transactions. Fast, and
//! exact about what a crash keeps.

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::Rng;
use zk_quorum::wire::ForwardedRequest;
use zk_quorum::zab::epoch_of;

use super::{Hist, Keep, Store, R};

/// See the module doc.
#[derive(Debug, Default)]
pub struct ModelStore {
    accepted: u32,
    current: u32,
    /// Durable snapshot: the history through its last zxid.
    base: Hist,
    /// Log records after the base; `synced` of them are durable.
    log: Hist,
    synced: usize,
    db: Hist,
    receiving: Vec<u8>,
    received: Option<Hist>,
}

impl Store for ModelStore {
    fn open(_sid: i64, _seed: u64) -> Self {
        ModelStore::default()
    }

    fn epochs(&self) -> (u32, u32) {
        (self.accepted, self.current)
    }

    fn last_zxid(&self) -> i64 {
        self.log.last().or(self.base.last()).map_or(0, |r| r.0)
    }

    fn durable_zxid(&self) -> i64 {
        match self.synced {
            0 => self.base.last().map_or(0, |r| r.0),
            n => self.log[n - 1].0,
        }
    }

    fn logged(&self) -> Hist {
        self.log.clone()
    }

    fn history(&self) -> Hist {
        self.base.iter().chain(self.log.iter()).cloned().collect()
    }

    fn append(&mut self, zxid: i64, payload: Bytes) -> R {
        self.log.push((zxid, payload));
        Ok(())
    }

    fn sync(&mut self) -> R {
        self.synced = self.log.len();
        Ok(())
    }

    fn set_epoch(&mut self, accepted: bool, epoch: u32) -> R {
        if accepted {
            self.accepted = epoch;
        } else {
            self.current = epoch;
        }
        Ok(())
    }

    fn truncate(&mut self, zxid: i64, _now_ms: u64) -> Result<bool, String> {
        self.base.retain(|r| r.0 <= zxid);
        self.log.retain(|r| r.0 <= zxid);
        self.synced = self.log.len();
        self.db = self.history();
        Ok(true)
    }

    fn receive(&mut self, _zxid: i64) {
        self.receiving.clear();
        self.received = None;
    }

    fn feed(&mut self, bytes: &[u8]) -> Result<bool, String> {
        self.receiving.extend_from_slice(bytes);
        self.received = decode_snapshot(&self.receiving);
        Ok(self.received.is_some())
    }

    fn install(&mut self, zxid: i64, live: bool) -> R {
        let hist = self.received.take().ok_or("no snapshot received")?;
        if hist.last().map_or(0, |r| r.0) != zxid {
            return Err(format!("snapshot of {zxid:#x} holds {:?}", hist.last().map(|r| r.0)));
        }
        self.base = hist.clone();
        self.log.clear();
        self.synced = 0;
        if live {
            self.db = hist;
        }
        Ok(())
    }

    fn snapshot(&self, zxid: i64) -> Result<Bytes, String> {
        if self.db.last().map_or(0, |r| r.0) != zxid {
            return Err(format!("snapshot of {zxid:#x} asked with the database at {:?}", self.db.last()));
        }
        Ok(encode_snapshot(&self.db))
    }

    fn commit(&mut self, zxid: i64, payload: &Bytes) -> R {
        self.db.push((zxid, payload.clone()));
        Ok(())
    }

    fn applied_zxid(&self) -> i64 {
        self.db.last().map_or(0, |r| r.0)
    }

    fn reload(&mut self, _now_ms: u64) -> R {
        self.db = self.history();
        Ok(())
    }

    fn crash(&mut self, keep: Keep, rng: &mut StdRng) {
        let unsynced = self.log.len() - self.synced;
        let keep = match keep {
            Keep::Durable => self.synced,
            Keep::All => self.log.len(),
            Keep::Random => self.synced + rng.gen_range(0..=unsynced),
            Keep::Part => self.synced + usize::from(unsynced > 1),
        };
        self.log.truncate(keep);
        self.synced = keep;
        self.db.clear();
        self.received = None;
    }

    fn restart(&mut self, _now_ms: u64) -> Result<bool, String> {
        // Apache 3.8 refuses to start with currentEpoch below the last record's epoch; starting
        // with the lower epoch only ranks the server lower in elections, which is safe.
        Ok(self.current < epoch_of(self.last_zxid()))
    }

    /// A snapshot is taken and the log before it purged: only synced records move.
    fn purge(&mut self) -> R {
        if self.synced > 3 {
            let k = self.synced - 3;
            let moved: Vec<(i64, Bytes)> = self.log.drain(..k).collect();
            self.base.extend(moved);
            self.synced -= k;
        }
        Ok(())
    }

    fn prep(&mut self, zxid: i64, _wall_ms: i64, req: &ForwardedRequest) -> Result<Bytes, String> {
        Ok(Bytes::from(format!("w{zxid:x}.{}.{}", req.session_id, req.cxid)))
    }

    fn dump(&self) -> String {
        self.db.iter().map(|(z, p)| format!("{z:#x} {p:?}\n")).collect()
    }

    fn reference_dump(chain: &Hist) -> String {
        chain.iter().map(|(z, p)| format!("{z:#x} {p:?}\n")).collect()
    }

    fn make_hist(recs: &[(i64, String)]) -> Hist {
        recs.iter().map(|(z, t)| (*z, Bytes::from(t.clone()))).collect()
    }

    fn preload(&mut self, accepted: u32, current: u32, hist: &Hist, purged: bool) -> R {
        self.accepted = accepted;
        self.current = current;
        if purged {
            self.base = hist.clone();
        } else {
            self.synced = hist.len();
            self.log = hist.clone();
        }
        Ok(())
    }

    fn check_applied(&self, chain: &Hist) -> R {
        let n = self.db.len().min(chain.len());
        if self.db[..n] != chain[..n] {
            return Err("the database diverges from the chain".into());
        }
        Ok(())
    }
}

/// The model's snapshot stream: u32 total length, then (i64 zxid, u32 len, bytes) records.
fn encode_snapshot(h: &Hist) -> Bytes {
    let mut out = vec![0u8; 4];
    for (z, p) in h {
        out.extend_from_slice(&z.to_be_bytes());
        out.extend_from_slice(&(p.len() as u32).to_be_bytes());
        out.extend_from_slice(p);
    }
    let n = out.len() as u32;
    out[..4].copy_from_slice(&n.to_be_bytes());
    Bytes::from(out)
}

fn decode_snapshot(buf: &[u8]) -> Option<Hist> {
    let n = u32::from_be_bytes(buf.get(..4)?.try_into().ok()?) as usize;
    if buf.len() < n {
        return None;
    }
    let mut h = Vec::new();
    let mut pos = 4;
    while pos < n {
        let z = i64::from_be_bytes(buf[pos..pos + 8].try_into().ok()?);
        let len = u32::from_be_bytes(buf[pos + 8..pos + 12].try_into().ok()?) as usize;
        h.push((z, Bytes::copy_from_slice(&buf[pos + 12..pos + 12 + len])));
        pos += 12 + len;
    }
    Some(h)
}
