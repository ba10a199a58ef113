//! The calling thread's CPU time, for measuring work (never for deciding anything).

use std::time::Duration;

/// CPU time consumed by the calling thread so far (`CLOCK_THREAD_CPUTIME_ID`). Zero on
/// platforms without a thread CPU clock.
pub fn thread_cpu_time() -> Duration {
    #[cfg(unix)]
    {
        let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
        let nanos = u32::try_from(ts.tv_nsec).unwrap_or(0);
        Duration::new(secs, nanos)
    }
    #[cfg(not(unix))]
    {
        Duration::ZERO
    }
}

/// Sums the thread CPU time spent inside measured sections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuMeter {
    total: Duration,
}

impl CpuMeter {
    /// Runs `f`, adding the thread CPU time it takes to the total.
    pub fn measure<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let start = thread_cpu_time();
        let result = f();
        self.total += thread_cpu_time().saturating_sub(start);
        result
    }

    /// The time measured so far.
    pub fn total(&self) -> Duration {
        self.total
    }

    /// The time measured so far in milliseconds, rounded to the microsecond.
    pub fn total_ms(&self) -> f64 {
        (self.total.as_micros() as f64) / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_busy_work_and_nothing_else() {
        let mut meter = CpuMeter::default();
        let mut x = 0u64;
        meter.measure(|| {
            for i in 0..2_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(i));
            }
        });
        std::hint::black_box(x);
        let after_work = meter.total();
        if cfg!(unix) {
            assert!(after_work > Duration::ZERO);
        }
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            meter.total(),
            after_work,
            "sleeping outside a section adds nothing"
        );
    }
}
