//! Hand-worked cases of FCFS, EASY and conservative backfilling on a machine of identical
//! processors, with every job's start under each policy: the reference's tests
//! (`reference.rs`) check the reference against them, the baselines' tests (`baselines.rs`)
//! the replay through the scheduling core.

use super::reference::RefJob;
use fairsched_resources::{ResourceKind, Resources};
use fairsched_sim::trace::{MachineGroup, Trace, TraceFormat, TraceJob};
use std::collections::BTreeMap;

/// Marks a job that never starts in the expected starts of a [`Case`].
pub const NEVER: u64 = u64::MAX;

/// A hand-worked case: jobs as (submit, run, procs, estimate) in ms, and the expected start of
/// each job under each policy.
pub struct Case {
    pub name: &'static str,
    pub procs: u64,
    pub jobs: &'static [(u64, u64, u64, u64)],
    pub fcfs: &'static [u64],
    pub easy: &'static [u64],
    pub conservative: &'static [u64],
}

pub const CASES: &[Case] = &[
    Case {
        // J1 (6 of 10) waits for J0 until 10; J2 (4, 5 ms) fits beside J0 and ends by then.
        name: "head blocked, a short job backfills",
        procs: 10,
        jobs: &[(0, 10, 6, 10), (0, 5, 6, 5), (0, 5, 4, 5)],
        fcfs: &[0, 10, 10],
        easy: &[0, 10, 0],
        conservative: &[0, 10, 0],
    },
    Case {
        // J1 (8) has shadow 10 with 2 extra processors: J2 (2, 100 ms) takes them, after which
        // J3 (1, 100 ms) fits now but has no extra left and does not end by 10.
        name: "a long narrow job backfills on the extra processors",
        procs: 10,
        jobs: &[
            (0, 10, 5, 10),
            (0, 10, 8, 10),
            (0, 100, 2, 100),
            (0, 100, 1, 100),
        ],
        fcfs: &[0, 10, 10, 20],
        easy: &[0, 10, 0, 20],
        conservative: &[0, 10, 0, 20],
    },
    Case {
        // J1 needs the whole machine at 10 (no extra): J2 (5, 20 ms) fits now but would delay
        // it; J3 (5, 10 ms) ends by 10 and backfills.
        name: "a long job that would delay the head does not start",
        procs: 10,
        jobs: &[
            (0, 10, 5, 10),
            (0, 10, 10, 10),
            (0, 20, 5, 20),
            (0, 10, 5, 10),
        ],
        fcfs: &[0, 10, 20, 20],
        easy: &[0, 10, 20, 0],
        conservative: &[0, 10, 20, 0],
    },
    Case {
        // J0 is expected to end at 10 but runs until 30. J2 backfills until 5. At 12 J0 is
        // past its estimate, expected to end now: the head J1 is due now (shadow time 12), so
        // J3 (5, 5 ms) does not start although 5 processors are free, but EASY starts J4
        // (0 ms), which ends by 12. Conservative: J1 keeps its reservation at 12 while J0
        // holds the processors, J3 and J4 are planned after it.
        name: "an overrunning job",
        procs: 10,
        jobs: &[
            (0, 30, 5, 10),
            (0, 10, 10, 10),
            (0, 5, 5, 5),
            (12, 5, 5, 5),
            (12, 0, 5, 0),
        ],
        fcfs: &[0, 30, 40, 40, 45],
        easy: &[0, 30, 0, 40, 12],
        conservative: &[0, 30, 0, 40, 40],
    },
    Case {
        // J1 overruns its estimate: from 1 on it is expected to end now, so the head J3 (2)
        // is due now with no extra processor, and J4 (1, 1 ms) does not start at 3, nor J5 at
        // 5. At 7 J0 reaches its estimate (no job ends): both are expected to end now, when 3
        // processors are free, 1 extra, which J4 takes (ending at once), then J5. J1 ends at
        // 9, and J3 and J6 start. Conservative: at 7 no running job is expected beyond now.
        name: "a running job reaching its estimate gives the head extra processors",
        procs: 3,
        jobs: &[
            (0, 11, 1, 7),
            (0, 9, 1, 1),
            (0, 0, 1, 1),
            (1, 0, 2, 1),
            (3, 0, 1, 1),
            (5, 0, 1, 1),
            (7, 0, 2, 1),
        ],
        fcfs: &[0, 0, 0, 9, 9, 9, 9],
        easy: &[0, 0, 0, 9, 7, 7, 9],
        conservative: &[0, 0, 0, 9, 7, 7, 9],
    },
    Case {
        // J1 overruns its estimate. At 13 the head J3 (3) is due now (J1 expected to end now),
        // with 1 extra processor, which J4 (1, 1 ms) takes; J5 and J6 do not start. At 14
        // J4 reaches its estimate (no job ends): 1 extra processor again, for J5 (ending at
        // once), then J6, so J7 (submitted at 14, behind them) waits until 15.
        name: "a job started on the extra processors reaching its estimate gives them back",
        procs: 4,
        jobs: &[
            (0, 11, 2, 11),
            (6, 9, 2, 1),
            (9, 2, 1, 2),
            (9, 0, 3, 1),
            (11, 2, 1, 1),
            (12, 0, 1, 1),
            (12, 1, 1, 1),
            (14, 0, 1, 1),
        ],
        fcfs: &[0, 6, 11, 15, 15, 15, 15, 15],
        easy: &[0, 6, 11, 15, 13, 14, 14, 15],
        conservative: &[0, 6, 11, 15, 13, 14, 14, 15],
    },
    Case {
        // J2 (6) is due at 10, when J0 and J1 both end: 10 processors free then, 4 extra,
        // which J3 (2, 100 ms) uses at once.
        name: "extra counts every job ending at the shadow time",
        procs: 10,
        jobs: &[
            (0, 10, 4, 10),
            (0, 10, 4, 10),
            (0, 10, 6, 10),
            (0, 100, 2, 100),
        ],
        fcfs: &[0, 0, 10, 10],
        easy: &[0, 0, 10, 0],
        conservative: &[0, 0, 10, 0],
    },
    Case {
        // At 10, J0 ends and J2, J3 arrive: the waiting J1 goes first, then J2 (submitted
        // at 10) takes the last processor; J3 waits.
        name: "simultaneous end and arrivals",
        procs: 4,
        jobs: &[
            (0, 10, 4, 10),
            (5, 10, 3, 10),
            (10, 10, 1, 10),
            (10, 1, 2, 1),
        ],
        fcfs: &[0, 10, 10, 20],
        easy: &[0, 10, 10, 20],
        conservative: &[0, 10, 10, 20],
    },
    Case {
        // J0 and J1 both end at 10, when J2 (the whole machine) can start; J3 and J4 wait.
        name: "simultaneous ends",
        procs: 4,
        jobs: &[
            (0, 10, 2, 10),
            (0, 10, 2, 15),
            (0, 20, 4, 20),
            (10, 5, 2, 5),
            (10, 5, 2, 5),
        ],
        fcfs: &[0, 0, 10, 30, 30],
        easy: &[0, 0, 10, 30, 30],
        conservative: &[0, 0, 10, 30, 30],
    },
    Case {
        // J0 runs 0 ms: it ends at the instant it starts, and J1 gets the machine then.
        name: "a job of 0 ms",
        procs: 2,
        jobs: &[(0, 0, 2, 0), (0, 5, 2, 5), (3, 0, 2, 0)],
        fcfs: &[0, 0, 5],
        easy: &[0, 0, 5],
        conservative: &[0, 0, 5],
    },
    Case {
        // J1 (0 ms, the whole machine) is due at 4: conservative holds its processors at that
        // instant, so J2 (5 ms) does not backfill across it at 0.
        name: "a job of 0 ms planned in the future",
        procs: 2,
        jobs: &[(0, 4, 1, 4), (0, 0, 2, 0), (0, 5, 1, 5)],
        fcfs: &[0, 4, 4],
        easy: &[0, 4, 4],
        conservative: &[0, 4, 4],
    },
    Case {
        // J0 (5 of 4 processors) never starts and blocks nobody.
        name: "a job wider than the machine",
        procs: 4,
        jobs: &[(0, 5, 5, 5), (0, 5, 4, 5), (1, 5, 1, 5)],
        fcfs: &[NEVER, 0, 5],
        easy: &[NEVER, 0, 5],
        conservative: &[NEVER, 0, 5],
    },
    Case {
        // J1 (6) is due at 10, J2 (8) after it at 20. EASY protects only J1: J3 (4, 35 ms)
        // uses J1's extra processors, and J2 waits for J3's end. Conservative plans J3 after
        // J2 (at 30, when 4 processors are free for 35 ms).
        name: "EASY delays the second job, conservative does not",
        procs: 10,
        jobs: &[
            (0, 10, 6, 10),
            (0, 10, 6, 10),
            (0, 10, 8, 10),
            (0, 35, 4, 35),
        ],
        fcfs: &[0, 10, 20, 30],
        easy: &[0, 10, 35, 0],
        conservative: &[0, 10, 20, 30],
    },
    Case {
        // At 0, J3 (5, 6 ms) is planned at 4 beside J0, before J2 (the whole machine) at 10.
        // J0 ends at 2 instead of 10: the schedule recomputed in queue order moves J2 to 4,
        // and J3 after it, to 14, later than its first reservation.
        name: "conservative recomputed from scratch: a job can start after its first reservation",
        procs: 10,
        jobs: &[(0, 2, 5, 10), (0, 4, 5, 4), (0, 10, 10, 10), (0, 6, 5, 6)],
        fcfs: &[0, 0, 4, 14],
        easy: &[0, 0, 4, 14],
        conservative: &[0, 0, 4, 14],
    },
];

/// The jobs of a case's table.
pub fn jobs_of(table: &[(u64, u64, u64, u64)]) -> Vec<RefJob> {
    (table.iter())
        .map(|&(submit_ms, run_ms, procs, estimate_ms)| RefJob {
            submit_ms,
            run_ms,
            procs,
            estimate_ms,
        })
        .collect()
}

/// `jobs` as a trace of a machine of `procs` processors on nodes of `node_procs` (one cpu and
/// one user slot per processor, as an SWF trace's): job `i` is `j{i}` of user `u{i}`, with its
/// estimate as requested time (none when it is 0: a time limit is positive).
pub fn trace_of(jobs: &[RefJob], procs: u64, node_procs: u64) -> Trace {
    Trace {
        format: TraceFormat::Swf,
        jobs: (jobs.iter().enumerate())
            .map(|(i, j)| TraceJob {
                id: format!("j{i}"),
                line: i as u64 + 1,
                submit_ms: j.submit_ms,
                duration_ms: j.run_ms,
                user: format!("u{i}"),
                group: "g1".to_string(),
                width: u32::try_from(j.procs).expect("a small width"),
                unit: Resources::ZERO.with(ResourceKind::Cpu, 1.0),
                trace_wait_ms: None,
                time_limit_ms: (j.estimate_ms > 0).then_some(j.estimate_ms),
                tag_filter: None,
            })
            .collect(),
        skipped: BTreeMap::new(),
        adjusted: BTreeMap::new(),
        machine: Some(vec![MachineGroup {
            count: u32::try_from(procs / node_procs).expect("a small machine"),
            resources: Resources::ZERO
                .with(ResourceKind::Cpu, node_procs as f64)
                .with(ResourceKind::UserSlots, node_procs as f64),
            tags: Vec::new(),
        }]),
    }
}
