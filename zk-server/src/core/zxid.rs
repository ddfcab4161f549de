//! Transaction ids: an epoch (one per established leader) and a counter within it.

use std::fmt;

/// A zxid: `epoch` in the high 32 bits, `counter` in the low 32, as Apache lays it out in the
/// i64 every record carries. Ordered as that i64 (epoch first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Zxid {
    /// The leader's epoch that proposed it.
    pub epoch: u32,
    /// Position within the epoch; a new epoch's first proposal has counter 1.
    pub counter: u32,
}

impl Zxid {
    /// The zxid before anything (an empty database).
    pub const ZERO: Zxid = Zxid { epoch: 0, counter: 0 };

    /// Splits the wire form.
    pub fn from_i64(z: i64) -> Zxid {
        let u = z as u64;
        Zxid { epoch: (u >> 32) as u32, counter: u as u32 }
    }

    /// The wire form.
    pub fn to_i64(self) -> i64 {
        ((u64::from(self.epoch) << 32) | u64::from(self.counter)) as i64
    }

    /// The last counter an ensemble leader proposes in an epoch: as Apache's leader does, it
    /// hands over to a new epoch rather than propose a zxid whose low 32 bits are all set.
    pub const LAST_COUNTER: u32 = u32::MAX - 1;

    /// The next zxid in the same epoch, or None when the epoch has no more
    /// ([`Self::LAST_COUNTER`] reached: an ensemble leader must then hand over to a new epoch).
    pub fn next_in_epoch(self) -> Option<Zxid> {
        (self.counter < Self::LAST_COUNTER).then(|| Zxid { epoch: self.epoch, counter: self.counter + 1 })
    }

    /// The next zxid as a plain 64-bit increment: past the last counter it moves into the next
    /// epoch (what a standalone Apache server does, whose zxid is just a counted long).
    pub fn next_wrapping(self) -> Zxid {
        Zxid::from_i64(self.to_i64().wrapping_add(1))
    }
}

impl fmt::Display for Zxid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:x}", self.to_i64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_orders_as_the_wire_form() {
        for z in [0i64, 1, 0xffff_ffff, 0x1_0000_0000, 0x5_0000_0007, i64::MAX] {
            assert_eq!(Zxid::from_i64(z).to_i64(), z);
        }
        let a = Zxid { epoch: 1, counter: u32::MAX };
        let b = Zxid { epoch: 2, counter: 0 };
        assert!(a < b && a.to_i64() < b.to_i64());
        assert_eq!(a.next_in_epoch(), None);
        assert_eq!(a.next_wrapping(), b);
        // Apache's leader never proposes counter 0xffffffff: 0xfffffffe is an epoch's last.
        let last = Zxid { epoch: 1, counter: Zxid::LAST_COUNTER };
        assert_eq!(Zxid { epoch: 1, counter: 0xffff_fffd }.next_in_epoch(), Some(last));
        assert_eq!(last.next_in_epoch(), None);
        assert_eq!(Zxid { epoch: 3, counter: 9 }.next_in_epoch(), Some(Zxid { epoch: 3, counter: 10 }));
        assert_eq!(Zxid::from_i64(0x3_0000_0010).to_string(), "0x300000010");
    }
}
