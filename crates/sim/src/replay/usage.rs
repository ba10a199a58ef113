//! The cluster's usage over virtual time, exactly: the integral of the measured resource held
//! by jobs, in bins of a fixed length on a fixed grid (bin `k` covers `[k·bin, (k+1)·bin)`),
//! so that a plot shows each bin's time-weighted mean instead of joining sparse samples across
//! idle days. The bin length is a round unit ([`UNITS`]) chosen for the trace's span; a plot
//! merges whole bins into a coarser round unit ([`UsageBins::merged`]).

use fairsched_core::Millis;

/// Round bin lengths (ms), each a multiple of the one before: 1 s, 10 s, 1 min, 5 min, 15 min,
/// 1 h, 6 h, 1 day, 1 week.
pub const UNITS: [(Millis, &str); 9] = [
    (1_000, "1 s"),
    (10_000, "10 s"),
    (60_000, "1 min"),
    (300_000, "5 min"),
    (900_000, "15 min"),
    (3_600_000, "hourly"),
    (21_600_000, "6 h"),
    (86_400_000, "daily"),
    (604_800_000, "weekly"),
];

/// Most bins a span is planned with (more come if the replay runs longer than planned).
pub const PLANNED_BINS: u64 = 4000;

/// The integral of usage per bin.
#[derive(Clone, Debug, PartialEq)]
pub struct UsageBins {
    /// Bin length, ms (one of [`UNITS`]).
    pub bin_ms: Millis,
    /// Per bin: the measured resource held (raw units) times the time it was held (ms).
    pub used_ms: Vec<f64>,
    /// Virtual time the bins cover up to (the last bin may end early).
    pub end_ms: Millis,
}

impl UsageBins {
    /// Empty bins of the smallest round unit that covers `span_ms` in at most
    /// [`PLANNED_BINS`] bins.
    pub fn for_span(span_ms: Millis) -> UsageBins {
        let bin_ms = UNITS
            .iter()
            .map(|u| u.0)
            .find(|&u| span_ms / u < PLANNED_BINS)
            .unwrap_or(UNITS[UNITS.len() - 1].0);
        UsageBins {
            bin_ms,
            used_ms: Vec::new(),
            end_ms: 0,
        }
    }

    /// `used` (raw units) was held from `from` to `to` (ms).
    pub fn add(&mut self, from: Millis, to: Millis, used: f64) {
        self.end_ms = self.end_ms.max(to);
        if to <= from {
            return;
        }
        let last = ((to - 1) / self.bin_ms) as usize;
        if self.used_ms.len() <= last {
            self.used_ms.resize(last + 1, 0.0);
        }
        if used == 0.0 {
            return;
        }
        let mut t = from;
        while t < to {
            let bin = t / self.bin_ms;
            let end = ((bin + 1) * self.bin_ms).min(to);
            self.used_ms[bin as usize] += used * (end - t) as f64;
            t = end;
        }
    }

    /// The same integral in bins `factor` times as long (`factor` ≥ 1).
    pub fn merged(&self, factor: u64) -> UsageBins {
        let factor = factor.max(1);
        UsageBins {
            bin_ms: self.bin_ms * factor,
            used_ms: self
                .used_ms
                .chunks(factor as usize)
                .map(|c| c.iter().sum())
                .collect(),
            end_ms: self.end_ms,
        }
    }

    /// These bins merged into the smallest round unit that shows the span in at most `max`
    /// bins, with that unit's name.
    pub fn for_display(&self, max: usize) -> (UsageBins, &'static str) {
        let max = max.max(1) as u64;
        let span = self.end_ms.max(1);
        for &(unit, name) in &UNITS {
            if unit < self.bin_ms || unit % self.bin_ms != 0 {
                continue;
            }
            if span.div_ceil(unit) <= max || unit == UNITS[UNITS.len() - 1].0 {
                return (self.merged(unit / self.bin_ms), name);
            }
        }
        (self.clone(), "")
    }

    /// Each bin's start (ms) and its mean usage as a fraction of `total` (raw units): the
    /// integral over the bin's length (the last bin's ends at `end_ms`).
    pub fn means(&self, total: f64) -> Vec<(Millis, f64)> {
        self.used_ms
            .iter()
            .enumerate()
            .filter_map(|(k, &used)| {
                let start = k as u64 * self.bin_ms;
                let end = (start + self.bin_ms).min(self.end_ms.max(start));
                (end > start && total > 0.0).then(|| (start, used / (total * (end - start) as f64)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_split_exactly_over_bins() {
        let mut bins = UsageBins::for_span(3 * 3_600_000);
        assert_eq!(bins.bin_ms, 10_000, "3 hours in at most 4,000 bins");
        let mut hourly = UsageBins {
            bin_ms: 3_600_000,
            ..bins.clone()
        };
        // 10 units for the first half hour, nothing for 1.5 h, 5 units from 2 h to 2.5 h.
        for b in [&mut bins, &mut hourly] {
            b.add(0, 1_800_000, 10.0);
            b.add(1_800_000, 7_200_000, 0.0);
            b.add(7_200_000, 9_000_000, 5.0);
        }
        assert_eq!(
            hourly.means(10.0),
            vec![(0, 0.5), (3_600_000, 0.0), (7_200_000, 0.5)],
            "the last bin's mean is over the half hour it covers"
        );
        let (shown, name) = bins.for_display(4);
        assert_eq!(name, "hourly");
        assert_eq!(shown, hourly);
        // A usage that spans bins lands in each in proportion.
        let mut b = UsageBins {
            bin_ms: 1_000,
            used_ms: Vec::new(),
            end_ms: 0,
        };
        b.add(500, 2_250, 4.0);
        assert_eq!(b.used_ms, vec![2_000.0, 4_000.0, 1_000.0]);
        assert_eq!(b.end_ms, 2_250);
    }

    #[test]
    fn long_spans_get_coarse_units() {
        assert_eq!(UsageBins::for_span(0).bin_ms, 1_000);
        assert_eq!(UsageBins::for_span(3 * 365 * 86_400_000).bin_ms, 86_400_000);
        let mut b = UsageBins::for_span(86_400_000);
        b.add(0, 40 * 86_400_000, 1.0);
        let (shown, name) = b.for_display(1000);
        assert_eq!((name, shown.used_ms.len()), ("hourly", 960));
    }
}
