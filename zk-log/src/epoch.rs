//! Zab's two durable epochs: `acceptedEpoch` (the newest epoch this server agreed to follow, in
//! discovery) and `currentEpoch` (the epoch whose leader's history this server has fully
//! synced). Each is a file holding the epoch in decimal ASCII without a newline, under the
//! names Apache ZooKeeper uses, so an operator recognises them; zkrs keeps them in its snapshot
//! directory (`<dataDir>/zkrs-snap/`, where Apache keeps them in `<dataDir>/version-2/`).
//!
//! Every update is durable when it returns, and atomic: the value goes to `<name>.tmp`, which
//! is synced, then renamed over the file, and the directory synced ([`crate::replace_file`]).
//! docs/log-format.md ("Epoch files") gives the start-up checks and the crash cases.

use crate::error::LogError;
use crate::storage::{read_small_file, replace_file, Storage, TMP_SUFFIX};

/// File holding the accepted epoch.
pub const ACCEPTED_EPOCH_FILE: &str = "acceptedEpoch";
/// File holding the current epoch.
pub const CURRENT_EPOCH_FILE: &str = "currentEpoch";
/// An epoch file longer than this is not one (19 digits and a line ending at most).
const EPOCH_FILE_BYTES_MAX: u64 = 32;

/// The epoch of a zxid: its high 32 bits.
pub fn epoch_of(zxid: i64) -> i64 {
    zxid >> 32
}

/// The two epochs, read at start and kept durable on every change.
#[derive(Debug)]
pub struct EpochStore<S: Storage> {
    storage: S,
    accepted: i64,
    current: i64,
    /// Set after a failed write: what the file holds is then unknown until a restart reads it.
    poisoned: Option<String>,
}

/// Parses an epoch file's bytes: decimal digits, optionally followed by one line ending
/// (Apache writes none, but an operator's editor may add one).
fn parse_epoch(bytes: &[u8], shown: &str) -> Result<i64, LogError> {
    let bad = |reason: String| LogError::Epoch { file: shown.to_string(), reason };
    let digits = bytes.strip_suffix(b"\r\n").or_else(|| bytes.strip_suffix(b"\n")).unwrap_or(bytes);
    if digits.is_empty() {
        return Err(bad("empty; it should hold an epoch in decimal".into()));
    }
    if let Some(at) = digits.iter().position(|b| !b.is_ascii_digit()) {
        return Err(bad(format!("byte {at} ({:#04x}) is not a decimal digit", digits[at])));
    }
    std::str::from_utf8(digits)
        .ok()
        .and_then(|t| t.parse::<i64>().ok())
        .ok_or_else(|| bad("the number is too large for an epoch".into()))
}

fn read_epoch<S: Storage>(storage: &S, name: &str) -> Result<Option<i64>, LogError> {
    let shown = storage.display_name(name);
    match read_small_file(storage, name, EPOCH_FILE_BYTES_MAX) {
        Ok(None) => Ok(None),
        Ok(Some(b)) => parse_epoch(&b, &shown).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            Err(LogError::Epoch { file: shown, reason: format!("not an epoch file: {e}") })
        }
        Err(e) => Err(LogError::io("read", shown, e)),
    }
}

impl<S: Storage> EpochStore<S> {
    /// Reads both epochs from `storage` (the snapshot directory), checking them against each
    /// other and against `last_zxid`, the newest zxid this server holds (the later of its
    /// newest snapshot and its log's last record).
    ///
    /// - A missing file is created holding the epoch of `last_zxid` (a server that never took
    ///   part in an election), durably.
    /// - currentEpoch below the epoch of `last_zxid` means transactions of a newer epoch are
    ///   durable but the epoch that vouches for them is not. That happens, and is repaired, only
    ///   when a crash interrupted the currentEpoch update that follows them, which a
    ///   `currentEpoch.tmp` left behind shows: the epoch becomes the temp file's value if it
    ///   holds a whole, high enough one (the update was complete but for its rename), else the
    ///   epoch of `last_zxid`, and is written back. Without the temp file, the update was
    ///   interrupted before it began if acceptedEpoch covers that epoch (only its leader makes
    ///   its zxids, and the initial history it synced came before them): currentEpoch becomes it.
    ///   Otherwise it is an error.
    /// - Leftover temp files are removed once the checks pass.
    ///
    /// Errors: [`LogError::Epoch`] naming the file when it does not hold a decimal epoch, when
    /// currentEpoch is below the epoch of `last_zxid` and acceptedEpoch too, with no interrupted
    /// update to explain it,
    /// or when acceptedEpoch is below currentEpoch; [`LogError::Io`] if the backend fails.
    pub fn open(storage: S, last_zxid: i64) -> Result<EpochStore<S>, LogError> {
        let last_epoch = epoch_of(last_zxid.max(0));
        let names = storage.list().map_err(|e| LogError::io("list", storage.display_name("."), e))?;
        let current_tmp = format!("{CURRENT_EPOCH_FILE}{TMP_SUFFIX}");
        let accepted_tmp = format!("{ACCEPTED_EPOCH_FILE}{TMP_SUFFIX}");
        let mut store = EpochStore { storage, accepted: 0, current: 0, poisoned: None };
        let accepted_on_disk = read_epoch(&store.storage, ACCEPTED_EPOCH_FILE)?;
        let current = match read_epoch(&store.storage, CURRENT_EPOCH_FILE)? {
            None => {
                store.write(CURRENT_EPOCH_FILE, last_epoch)?;
                last_epoch
            }
            Some(c)
                if c < last_epoch
                    && !names.contains(&current_tmp)
                    && accepted_on_disk >= Some(last_epoch) =>
            {
                // A crash after records of epoch `last_epoch` were durable and before the
                // currentEpoch update began. Only that epoch's leader makes its zxids, and a
                // learner logs its sync stream in order, the history that leader started from
                // before anything of its own: a record of the epoch means the whole initial
                // history is here, which is what currentEpoch says (Apache covers the same window
                // with its updatingEpoch file).
                tracing::warn!(
                    "currentEpoch was {c}, behind the last zxid {last_zxid:#x} of accepted epoch \
                     {last_epoch}: the update was interrupted before it began; finishing it"
                );
                store.write(CURRENT_EPOCH_FILE, last_epoch)?;
                last_epoch
            }
            Some(c) if c < last_epoch => {
                if !names.contains(&current_tmp) {
                    return Err(LogError::Epoch {
                        file: store.storage.display_name(CURRENT_EPOCH_FILE),
                        reason: format!(
                            "the current epoch {c} is older than the epoch {last_epoch} of the last \
                             zxid {last_zxid:#x}, and no interrupted update ({current_tmp}) explains it"
                        ),
                    });
                }
                // The temp file was synced before its rename, so a whole value in it is the one
                // being written; a torn one (the crash came before its sync) is not used.
                let from_tmp = read_epoch(&store.storage, &current_tmp).ok().flatten();
                let e = from_tmp.filter(|&t| t >= last_epoch).unwrap_or(last_epoch);
                tracing::warn!(
                    "currentEpoch was {c}, behind the last zxid {last_zxid:#x}, with {current_tmp} \
                     left by an interrupted update: finishing it with {e}"
                );
                store.write(CURRENT_EPOCH_FILE, e)?;
                e
            }
            Some(c) => c,
        };
        let accepted = match accepted_on_disk {
            Some(a) => a,
            None => {
                store.write(ACCEPTED_EPOCH_FILE, last_epoch)?;
                last_epoch
            }
        };
        if accepted < current {
            return Err(LogError::Epoch {
                file: store.storage.display_name(ACCEPTED_EPOCH_FILE),
                reason: format!("the accepted epoch {accepted} is below the current epoch {current}"),
            });
        }
        let mut removed = false;
        for tmp in [&current_tmp, &accepted_tmp] {
            if names.contains(tmp) {
                match store.storage.remove(tmp) {
                    Ok(()) => removed = true,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(LogError::io("remove", store.storage.display_name(tmp), e)),
                }
            }
        }
        if removed {
            store
                .storage
                .sync_dir()
                .map_err(|e| LogError::io("sync directory", store.storage.display_name("."), e))?;
        }
        store.accepted = accepted;
        store.current = current;
        Ok(store)
    }

    /// The accepted epoch.
    pub fn accepted(&self) -> i64 {
        self.accepted
    }

    /// The current epoch.
    pub fn current(&self) -> i64 {
        self.current
    }

    /// Records a newly accepted epoch, durably when it returns (a learner before it sends
    /// ACKEPOCH; a leader once the new epoch is decided). Setting the same value again writes
    /// nothing.
    ///
    /// Errors: [`LogError::Epoch`] if `epoch` is below the accepted epoch (it never goes back) or
    /// the current one; [`LogError::Io`] if the write fails, after which the store refuses
    /// further updates ([`LogError::Poisoned`]): the file holds the old or the new value, and a
    /// restart reads which.
    pub fn set_accepted(&mut self, epoch: i64) -> Result<(), LogError> {
        self.check_usable()?;
        if epoch < self.accepted {
            return Err(self.refuse(
                ACCEPTED_EPOCH_FILE,
                format!("refusing to lower the accepted epoch from {} to {epoch}", self.accepted),
            ));
        }
        if epoch == self.accepted {
            return Ok(());
        }
        self.write(ACCEPTED_EPOCH_FILE, epoch)?;
        self.accepted = epoch;
        Ok(())
    }

    /// Records the current epoch, durably when it returns (a learner at NEWLEADER, after the
    /// synced transactions are durable and before it ACKs; a leader after the ACKEPOCH quorum).
    /// Setting the same value again writes nothing.
    ///
    /// Errors: [`LogError::Epoch`] if `epoch` is below the current epoch or above the accepted
    /// one; [`LogError::Io`] as for [`Self::set_accepted`].
    pub fn set_current(&mut self, epoch: i64) -> Result<(), LogError> {
        self.check_usable()?;
        if epoch < self.current || epoch > self.accepted {
            return Err(self.refuse(
                CURRENT_EPOCH_FILE,
                format!(
                    "refusing current epoch {epoch}: it must lie between the current epoch {} and the \
                 accepted epoch {}",
                    self.current, self.accepted
                ),
            ));
        }
        if epoch == self.current {
            return Ok(());
        }
        self.write(CURRENT_EPOCH_FILE, epoch)?;
        self.current = epoch;
        Ok(())
    }

    fn refuse(&self, name: &str, reason: String) -> LogError {
        LogError::Epoch { file: self.storage.display_name(name), reason }
    }

    fn check_usable(&self) -> Result<(), LogError> {
        match &self.poisoned {
            Some(why) => Err(LogError::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    fn write(&mut self, name: &str, epoch: i64) -> Result<(), LogError> {
        debug_assert!(epoch >= 0);
        let res = replace_file(&self.storage, name, epoch.to_string().as_bytes())
            .map_err(|e| LogError::io("write epoch", self.storage.display_name(name), e));
        if let Err(e) = &res {
            self.poisoned = Some(e.to_string());
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_apache_writes_and_refuses_the_rest() {
        assert_eq!(parse_epoch(b"7", "f").expect("plain"), 7);
        assert_eq!(parse_epoch(b"12\n", "f").expect("newline"), 12);
        for bad in [&b""[..], b"\n", b"-1", b"1 2", b"0x5", b"99999999999999999999", b"7\n\n"] {
            assert!(
                matches!(parse_epoch(bad, "f"), Err(LogError::Epoch { .. })),
                "{:?} accepted",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
