//! The process's allocator: mimalloc, with its purge turned off unless the environment says
//! otherwise.
//!
//! mimalloc hands freed memory back to the OS ("purge") a second after it is freed by default.
//! In a server answering thousands of heartbeats a second that work lands on whichever
//! thread frees, and the heartbeat p99 at 2,000 agents spread from 26-28 ms to 60-250 ms
//! (BENCHMARKS.md, "Scheduler server", session 14 and 16). With the purge off, freed memory
//! stays with the process and is reused by later allocations: the resident size is the
//! high-water mark (a few tens of MiB more in that benchmark).
//!
//! An operator who prefers memory returned to the OS sets `MIMALLOC_PURGE_DELAY` (in
//! milliseconds, mimalloc's own variable; `1000` is mimalloc's default) in the environment,
//! and it is left alone.

use std::ffi::c_long;

/// mimalloc's `mi_option_purge_delay` (v3 `mimalloc.h`; `libmimalloc-sys` does not name it).
/// `purge_delay_is_the_option_mimalloc_reads` checks it against the bundled library.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The environment variables mimalloc reads for the purge delay (the second is its old name).
const PURGE_DELAY_VARIABLES: [&str; 2] = ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"];

/// Turns mimalloc's purge off unless the environment sets the delay. Call first in `main`.
pub fn configure() {
    if PURGE_DELAY_VARIABLES
        .iter()
        .any(|name| std::env::var_os(name).is_some())
    {
        return;
    }
    set_purge_delay(-1);
}

fn set_purge_delay(milliseconds: c_long) {
    // SAFETY: `mi_option_set` only stores the value in mimalloc's option table, which is
    // safe at any time from any thread; the option number is checked by a test.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, milliseconds);
    }
}

#[cfg(test)]
fn purge_delay() -> c_long {
    // SAFETY: reads mimalloc's option table.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option number is mimalloc's purge delay: a major version other than 3 may number
    /// its options differently, and the default (1,000 ms in mimalloc 3.3, unless the test's
    /// environment sets it) is the purge delay's.
    #[test]
    fn purge_delay_is_the_option_mimalloc_reads() {
        // SAFETY: returns a constant.
        #[allow(unsafe_code)]
        let version = unsafe { libmimalloc_sys::mi_version() };
        assert_eq!(
            version / 10_000,
            3,
            "mimalloc {version}: check MI_OPTION_PURGE_DELAY"
        );
        if PURGE_DELAY_VARIABLES
            .iter()
            .all(|name| std::env::var_os(name).is_none())
        {
            assert_eq!(purge_delay(), 1000, "mimalloc's default purge delay");
        }
        set_purge_delay(-1);
        assert_eq!(purge_delay(), -1);
        set_purge_delay(1000);
        assert_eq!(purge_delay(), 1000);
    }
}
