//! Timing summaries as Apache ZooKeeper's metrics report them: a count, a sum, a minimum and a
//! maximum since start (or `srst`), and quantiles over a recent window.
//!
//! Apache's Prometheus provider keeps its summaries in the Prometheus Java client, whose
//! quantiles cover the last 10 minutes, kept as five 2-minute slices. A [`Summary`] keeps the
//! same window the same way: five slices, each an HDR histogram (the `hdrhistogram` crate, which
//! zkrs-bench already uses) of microseconds with two significant digits, so a quantile is within
//! 1% of the observed value it stands for, at any rate of observations and in bounded memory
//! (about 13 KiB a slice, allocated on a slice's first observation). A reservoir of samples
//! would lose the tail at high rates; a fixed-bucket histogram would lose precision at the ends.
//!
//! Time is handed in (`now_ms`, any monotonic origin), so the core, which reads no clock, keeps
//! its request latencies here too.

use hdrhistogram::Histogram;

/// How long a slice of the window lasts, ms.
const SLICE_MS: u64 = 2 * 60 * 1_000;
/// Slices in the window: with [`SLICE_MS`], the last 8 to 10 minutes.
const SLICES: usize = 5;
/// The largest value a histogram tells apart, µs (one hour); larger ones count as this.
const MAX_US: u64 = 3_600_000_000;

/// Which quantiles a summary exports, as Apache's detail levels decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// The median only (`fsynctime`, `snapshottime`, `election_time`, ...).
    Basic,
    /// 0.5, 0.9 and 0.99 in `/metrics`, and p50/p95/p99/p999 in `mntr` (`readlatency`,
    /// `updatelatency`, ...).
    Advanced,
}

impl Detail {
    /// The quantiles `/metrics` exports at this level (Apache's provider's).
    pub fn prometheus_quantiles(self) -> &'static [f64] {
        match self {
            Detail::Basic => &[0.5],
            Detail::Advanced => &[0.5, 0.9, 0.99],
        }
    }

    /// The percentiles `mntr` prints at this level, with their key's infix (Apache's
    /// `zk_p50_<name>` ...); none at the basic level.
    pub fn mntr_percentiles(self) -> &'static [(&'static str, f64)] {
        match self {
            Detail::Basic => &[],
            Detail::Advanced => &[("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999)],
        }
    }
}

/// One slice of the window: the observations made during the slice that began at `start_ms`.
#[derive(Debug)]
struct Slice {
    start_ms: u64,
    values_us: Histogram<u32>,
}

/// A timing summary. See the module docs.
#[derive(Debug)]
pub struct Summary {
    count: u64,
    sum_us: u64,
    min_us: u64,
    max_us: u64,
    /// The window's slices, the newest last; at most [`SLICES`].
    slices: Vec<Slice>,
}

impl Default for Summary {
    fn default() -> Self {
        Summary { count: 0, sum_us: 0, min_us: u64::MAX, max_us: 0, slices: Vec::new() }
    }
}

impl Summary {
    /// Adds one observation of `value_us` microseconds (or, in a summary of counts, of that
    /// count), made at `now_ms`.
    pub fn observe(&mut self, value_us: u64, now_ms: u64) {
        self.count += 1;
        self.sum_us = self.sum_us.saturating_add(value_us);
        self.min_us = self.min_us.min(value_us);
        self.max_us = self.max_us.max(value_us);
        let start_ms = now_ms - now_ms % SLICE_MS;
        if self.slices.last().is_none_or(|s| s.start_ms < start_ms) {
            if self.slices.len() == SLICES {
                self.slices.remove(0);
            }
            let values_us = Histogram::new_with_bounds(1, MAX_US, 2).expect("valid histogram bounds");
            self.slices.push(Slice { start_ms, values_us });
        }
        if let Some(slice) = self.slices.last_mut() {
            slice.values_us.saturating_record(value_us.clamp(1, MAX_US));
        }
    }

    /// The summary as of `now_ms`, in ms (its observations are µs), with the quantiles `qs` over
    /// the window (`None` for each when the window holds no observation, which Prometheus' text
    /// writes as NaN, as Apache's does).
    pub fn reading(&self, now_ms: u64, qs: &[f64]) -> Reading {
        self.reading_in(now_ms, qs, 1_000.0)
    }

    /// As [`Summary::reading`], each value divided by `per_unit` (1 for a summary of counts).
    pub fn reading_in(&self, now_ms: u64, qs: &[f64], per_unit: f64) -> Reading {
        let oldest_ms = (now_ms - now_ms % SLICE_MS).saturating_sub(SLICE_MS * (SLICES as u64 - 1));
        let mut window: Option<Histogram<u32>> = None;
        for s in self.slices.iter().filter(|s| s.start_ms >= oldest_ms) {
            match &mut window {
                None => window = Some(s.values_us.clone()),
                Some(w) => w.add(&s.values_us).expect("slices share their bounds"),
            }
        }
        let window = window.filter(|w| !w.is_empty());
        Reading {
            count: self.count,
            sum_ms: self.sum_us as f64 / per_unit,
            min_ms: if self.count == 0 { 0.0 } else { self.min_us as f64 / per_unit },
            max_ms: self.max_us as f64 / per_unit,
            quantiles: qs
                .iter()
                .map(|&q| {
                    (q, window.as_ref().map(|w| w.median_equivalent(w.value_at_quantile(q)) as f64 / 1_000.0))
                })
                .collect(),
        }
    }
}

/// A [`Summary`] read at one time, in ms (or, for a summary of counts, in counts).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Observations since start.
    pub count: u64,
    /// Their sum, ms.
    pub sum_ms: f64,
    /// The smallest, ms (0 before the first).
    pub min_ms: f64,
    /// The largest, ms (0 before the first).
    pub max_ms: f64,
    /// (quantile, value in ms) over the window, as asked; `None` with no observation there.
    pub quantiles: Vec<(f64, Option<f64>)>,
}

impl Reading {
    /// The mean, ms (0 before the first observation, as Apache's `mntr` prints it).
    pub fn avg_ms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ms / self.count as f64
        }
    }

    /// The value of quantile `q`, if it was asked for and the window has observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        self.quantiles.iter().find(|(at, _)| *at == q).and_then(|(_, v)| *v)
    }
}

/// A summary under its Apache name, as `mntr` and `/metrics` export it.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Apache's metric name (`fsynctime`, `readlatency`, ...).
    pub name: &'static str,
    /// Its detail level in Apache's ServerMetrics.
    pub detail: Detail,
    /// Its figures, with the quantiles of both its Prometheus and its `mntr` exports.
    pub reading: Reading,
}

impl Timing {
    /// Reads `summary`, of µs, at `now_ms` under `name`, in ms.
    pub fn read(name: &'static str, detail: Detail, summary: &Summary, now_ms: u64) -> Timing {
        Self::read_in(name, detail, summary, now_ms, 1_000.0)
    }

    /// Reads `summary` at `now_ms` under `name`, its values divided by `per_unit` (1 for a
    /// summary of counts, such as `startup_txns_loaded`).
    pub fn read_in(
        name: &'static str,
        detail: Detail,
        summary: &Summary,
        now_ms: u64,
        per_unit: f64,
    ) -> Timing {
        let mut qs: Vec<f64> = detail.prometheus_quantiles().to_vec();
        for (_, q) in detail.mntr_percentiles() {
            if !qs.contains(q) {
                qs.push(*q);
            }
        }
        Timing { name, detail, reading: summary.reading_in(now_ms, &qs, per_unit) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sums_and_extremes_since_start() {
        let mut s = Summary::default();
        assert_eq!(s.reading(0, &[0.5]).quantile(0.5), None);
        assert_eq!(s.reading(0, &[]).avg_ms(), 0.0);
        s.observe(1_500, 10);
        s.observe(500, 20);
        let r = s.reading(30, &[]);
        assert_eq!((r.count, r.sum_ms, r.min_ms, r.max_ms, r.avg_ms()), (2, 2.0, 0.5, 1.5, 1.0));
    }

    #[test]
    fn quantiles_within_one_percent() {
        let mut s = Summary::default();
        for v in 1..=1_000u64 {
            s.observe(v * 1_000, v);
        }
        let r = s.reading(2_000, &[0.5, 0.9, 0.99]);
        for (q, want) in [(0.5, 500.0), (0.9, 900.0), (0.99, 990.0)] {
            let got = r.quantile(q).unwrap();
            assert!((got - want).abs() <= want * 0.01, "q{q}: {got} for {want}");
        }
    }

    #[test]
    fn old_observations_leave_the_window_but_not_the_totals() {
        let mut s = Summary::default();
        s.observe(100_000, 0);
        // Nine minutes on, the first slice is still in the window ...
        let r = s.reading(9 * 60_000, &[0.5]);
        assert!(r.quantile(0.5).is_some_and(|v| (v - 100.0).abs() <= 1.0), "{r:?}");
        // ... ten minutes on it is not.
        let r = s.reading(10 * 60_000, &[0.5]);
        assert_eq!(r.quantile(0.5), None);
        assert_eq!(r.count, 1);
        // Newer observations alone make the quantile; at most five slices are kept.
        for minute in 0..30 {
            s.observe(2_000, 10 * 60_000 + minute * 60_000);
        }
        assert_eq!(s.slices.len(), SLICES);
        let r = s.reading(39 * 60_000, &[0.5]);
        assert!(r.quantile(0.5).is_some_and(|v| (v - 2.0).abs() <= 0.02), "{r:?}");
        assert_eq!(r.count, 31);
        assert_eq!(r.max_ms, 100.0);
    }
}
