//! Gang placement (`gang_placement`): one gang gathers resources at a time, a gang that cannot
//! complete times out and lets the next one try, and an aborted gang gives back what it held.

mod common;

use common::*;
use fairsched_core::{OperationId, Scheduler, SchedulerConfig, WhyTimes};
use serde_json::Value;

const TREE: &str = r#"{"pool_trees": {"default": {
    "config": {"gang_placement": {"enable": true, "assembly_timeout_ms": 1000}},
    "pools": {"a": {}, "b": {}, "c": {}}
}}}"#;

fn gang(id: &str, pool: &str, jobs: u32, cpu: f64) -> TestOp {
    let mut t = task(jobs, res(cpu, 1.0), Some(2000));
    t.gang = true;
    op(id, Some(pool), vec![t])
}

/// When `operation`'s first job started (`None`: never).
fn first_start(d: &Driver, operation: &str) -> Option<u64> {
    events(d, "allocation_started", operation)
        .first()
        .and_then(|e| e["t_ms"].as_u64())
}

fn events(d: &Driver, kind: &str, operation: &str) -> Vec<Value> {
    d.events
        .iter()
        .map(|e| serde_json::to_value(e).expect("event"))
        .filter(|v| v["event"] == kind && v["operation"] == operation)
        .collect()
}

/// node-0 is taken for good by `blocker`; `g1` (3 x 2 cpu) can never complete on node-1's
/// 4 cpu; `g2` (2 x 2 cpu) arrives while g1 gathers.
fn setup() -> (Scheduler, Driver) {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 2, res(4.0, 8.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("blocker", Some("c"), vec![task(1, res(4.0, 1.0), None)]),
    )
    .unwrap();
    d.run(&mut s, 0, 0, 100);
    d.start(&mut s, 100, gang("g1", "a", 3, 2.0)).unwrap();
    d.run(&mut s, 100, 300, 100);
    d.start(&mut s, 400, gang("g2", "b", 2, 2.0)).unwrap();
    (s, d)
}

#[test]
fn one_gang_gathers_at_a_time_and_a_stuck_one_times_out_for_the_next() {
    let (mut s, mut d) = setup();
    d.run(&mut s, 400, 800, 100);
    let snap = s.snapshot(800);
    let why = |name: &str| snap.operations[name].why.clone().unwrap_or_default();
    assert!(
        why("g1").contains("2 of its 3 pending jobs held on 1 nodes"),
        "{}",
        why("g1")
    );
    assert!(
        why("g2").contains("waits until gang \"g1\""),
        "{}",
        why("g2")
    );
    assert_eq!(snap.operations["g2"].running_job_count, 0);

    d.run(&mut s, 900, 3000, 100);
    // g1 began at 100 ms: the first update at or after 1100 ms releases it.
    let released = events(&d, "gang_released", "g1");
    assert_eq!(released[0]["reason"], "timeout", "{released:?}");
    let timed_out = released[0]["t_ms"].as_u64().unwrap();
    assert!((1100..=1300).contains(&timed_out), "{timed_out}");
    // g2 then fits whole into node-1's 4 cpu: placed at once, it starts in the same instant.
    let assembled = events(&d, "gang_assembled", "g2");
    assert_eq!(assembled.len(), 1, "{:?}", d.events);
    let g2_starts: Vec<u64> = events(&d, "allocation_started", "g2")
        .iter()
        .map(|e| e["t_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(g2_starts.len(), 2);
    assert!(g2_starts[1] - g2_starts[0] <= 100, "{g2_starts:?}");
    assert!(
        g2_starts[0] >= timed_out,
        "{g2_starts:?} before {timed_out}"
    );
    // g1 never starts a part of itself.
    assert_eq!(events(&d, "allocation_started", "g1"), Vec::<Value>::new());
}

#[test]
fn an_aborted_gang_gives_back_what_it_held() {
    let (mut s, mut d) = setup();
    d.run(&mut s, 400, 600, 100);
    s.abort_operation(700, &OperationId("g1".into())).unwrap();
    d.run(&mut s, 700, 1000, 100);
    let released = events(&d, "gang_released", "g1");
    assert_eq!(released.len(), 1, "{released:?}");
    assert_eq!(released[0]["reason"], "operation_finished");
    assert_eq!(released[0]["t_ms"], 700);
    // g2 gathers at once and starts.
    assert_eq!(
        events(&d, "allocation_started", "g2").len(),
        2,
        "{:?}",
        d.events
    );
}

/// A scheduler with `nodes` nodes of 1 cpu, fair-share updates every 100 ms, and one tree
/// with gang placement that never times out, holding as `hold` says; its pools are `q` (FIFO)
/// and `other` (fair share).
fn one_cpu_nodes(hold: &str, nodes: usize) -> Scheduler {
    let tree = format!(
        r#"{{"pool_trees": {{"default": {{
            "config": {{"gang_placement": {{"enable": true, "assembly_timeout_ms": 1000000,
                "hold": "{hold}"}}}},
            "pools": {{"q": {{"mode": "fifo"}}, "other": {{}}}}
        }}}}}}"#
    );
    let config = SchedulerConfig {
        fair_share_update_period_ms: 100,
        ..SchedulerConfig::default()
    };
    let mut s = scheduler(&tree, config);
    add_nodes(&mut s, nodes, res(1.0, 1.0));
    s
}

/// An operation of pool `q`: `jobs` jobs of 1 cpu with time limit `limit` that run `runs`
/// ms, a gang if `gang`.
fn limited(id: &str, jobs: u32, limit: u64, runs: u64, gang: bool) -> TestOp {
    let mut t = task(jobs, res(1.0, 1.0), Some(runs));
    t.spec.time_limit_ms = Some(limit);
    t.spec.gang = gang;
    op(id, Some("q"), vec![t])
}

/// `hold = "needed"` (EASY backfilling's reservation): the head gang holds only what it will
/// not get from the allocations expected to end by its start, so a long job may take the rest
/// of what is free; with `all_free` it holds everything free and no long job passes it. A job
/// that ends before the head needs its resources backfills either way.
#[test]
fn a_gang_holding_what_it_needs_leaves_the_rest_to_long_jobs() {
    // (hold, operations that start before the head gang, operations that do not)
    let cases = [
        ("needed", &["short", "long1"][..], &["long2"][..]),
        ("all_free", &["short"][..], &["long1", "long2"][..]),
    ];
    for (hold, before, not_before) in cases {
        let mut s = one_cpu_nodes(hold, 4);
        let mut d = Driver::new();
        // Two of the four nodes are busy until 1 s (their limit says so too).
        let job = |id: &str, jobs: u32, ms: u64| limited(id, jobs, ms, ms, true);
        d.start(&mut s, 0, job("running", 2, 1000)).unwrap();
        d.run(&mut s, 0, 0, 100);
        // The head needs 3 nodes: it starts when `running` ends, when 4 nodes are free, one
        // more than it needs.
        for (id, jobs, ms) in [
            ("head", 3, 5000),
            ("short", 1, 500),
            ("long1", 1, 10_000),
            ("long2", 1, 10_000),
        ] {
            d.start(&mut s, 100, job(id, jobs, ms)).unwrap();
        }
        d.run(&mut s, 100, 500, 100);
        // The head says what it waits for.
        let why = s.snapshot(500).operations["head"]
            .why
            .clone()
            .unwrap_or_default();
        let expected = match hold {
            "needed" => "holds the reservation, expected to start at 1000 ms",
            _ => "they start together once all are held",
        };
        assert!(why.contains(expected), "{hold}: {why}");
        d.run(&mut s, 600, 3000, 100);
        let first_start = |id: &str| first_start(&d, id);
        let head = first_start("head").expect("the head started");
        assert!((1000..=1100).contains(&head), "{hold}: head at {head}");
        for id in before {
            let t = first_start(id);
            assert!(t.is_some_and(|t| t < head), "{hold}: {id} at {t:?}");
        }
        for id in not_before {
            let t = first_start(id);
            assert!(t.is_none_or(|t| t >= head), "{hold}: {id} at {t:?}");
        }
    }
}

/// With `hold = "needed"` the reservation goes to the gang that has waited longest, whatever
/// the policy offers the node to first; with `all_free` to the first one offered.
#[test]
fn the_gang_waiting_longest_gets_the_reservation_when_it_holds_what_it_needs() {
    // (hold, the gang that assembles, the gang that starts first)
    let cases = [("needed", "old", "old"), ("all_free", "young", "young")];
    for (hold, assembles, first) in cases {
        // A FIFO pool ordered by weight first: `young` (weight 10) is offered nodes before
        // `old`, which has waited longer.
        let mut s = one_cpu_nodes(hold, 4);
        let mut d = Driver::new();
        let job = |id: &str, jobs: u32, ms: u64, gang: bool| limited(id, jobs, ms, ms, gang);
        // The nodes are full: two until 1 s, two until 3 s.
        let mut busy = job("busy", 2, 1000, false);
        busy.tasks.push(busy.tasks[0].clone());
        busy.tasks[1].duration_ms = Some(3000);
        busy.tasks[1].spec.time_limit_ms = Some(3000);
        d.start(&mut s, 0, busy).unwrap();
        d.run(&mut s, 0, 0, 100);
        d.start(&mut s, 100, job("old", 3, 5000, true)).unwrap();
        d.run(&mut s, 100, 100, 100);
        let mut young = job("young", 3, 5000, true);
        young.weight = Some(10.0);
        d.start(&mut s, 200, young).unwrap();
        d.run(&mut s, 200, 1500, 100);
        let assembling = s.gang_assembly(0).map(|a| a.operation.0.clone());
        assert_eq!(assembling.as_deref(), Some(assembles), "{hold}");
        d.run(&mut s, 1600, 4000, 100);
        let start = |id: &str| {
            events(&d, "allocation_started", id)
                .first()
                .and_then(|e| e["t_ms"].as_u64())
                .unwrap_or(u64::MAX)
        };
        let earliest = ["old", "young"]
            .into_iter()
            .min_by_key(|id| start(id))
            .unwrap();
        assert_eq!(
            earliest,
            first,
            "{hold}: old at {}, young at {}",
            start("old"),
            start("young")
        );
    }
}

/// With `hold = "needed"` a gang that fits into what is free starts at once, also while an
/// allocation past its time limit (expected to end now) makes the room at its start exceed
/// what it needs by more than what is free.
#[test]
fn a_gang_that_fits_starts_at_once_beside_an_overdue_allocation() {
    let mut s = one_cpu_nodes("needed", 4);
    let mut d = Driver::new();
    // Its limit says 100 ms; it runs 10 s.
    d.start(&mut s, 0, limited("overdue", 1, 100, 10_000, false))
        .unwrap();
    d.run(&mut s, 0, 400, 100);
    d.start(&mut s, 500, limited("g", 2, 1000, 1000, true))
        .unwrap();
    d.run(&mut s, 500, 1000, 100);
    let starts: Vec<u64> = events(&d, "allocation_started", "g")
        .iter()
        .map(|e| e["t_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert!(starts.iter().all(|&t| t <= 600), "{starts:?}");
}

/// Three 1-cpu nodes, two of them busy until 1000 ms with `long` (in another pool, so that
/// the gang heads its FIFO pool), and the 3-job gang `g` (hold "needed") submitted at 100 ms,
/// reserving, expected to start at 1000 ms.
fn reserving_gang() -> (Scheduler, Driver) {
    let mut s = one_cpu_nodes("needed", 3);
    let mut d = Driver::new();
    let mut long = limited("long", 2, 1000, 5000, false);
    long.pool = Some("other".to_string());
    d.start(&mut s, 0, long).unwrap();
    d.run(&mut s, 0, 0, 100);
    d.start(&mut s, 100, limited("g", 3, 1000, 1000, true))
        .unwrap();
    d.run(&mut s, 100, 100, 100);
    (s, d)
}

/// A driver whose clock means nothing to readers (a server's uptime) has `why` say times
/// from the snapshot's moment; others keep the core's milliseconds.
#[test]
fn why_says_times_from_now_when_the_driver_asks() {
    let check = |times: WhyTimes, at: u64, says: &[&str]| {
        let (mut s, _) = reserving_gang();
        s.set_why_times(times);
        let why = s.snapshot(at).operations["g"]
            .why
            .clone()
            .unwrap_or_default();
        for piece in says {
            assert!(
                why.contains(piece),
                "{times:?} at {at}: {why:?} lacks {piece:?}"
            );
        }
    };
    check(
        WhyTimes::Virtual,
        100,
        &["expected to start at 1000 ms", "ends by 1000 ms"],
    );
    check(
        WhyTimes::Virtual,
        400,
        &["expected to start at 1000 ms", "ends by 1000 ms"],
    );
    check(
        WhyTimes::FromNow,
        100,
        &["expected to start in 900 ms", "ends within 900 ms"],
    );
    check(
        WhyTimes::FromNow,
        400,
        &["expected to start in 600 ms", "ends within 600 ms"],
    );
}

#[test]
fn durations_read_at_a_glance() {
    use fairsched_core::why::duration_words;
    for (ms, words) in [
        (0, "0 ms"),
        (999, "999 ms"),
        (1000, "1.0 s"),
        (4_550, "4.5 s"),
        (59_999, "59 s"),
        (61_000, "1 min 1 s"),
        (3_600_000 * 3 + 60_000 * 20, "3 h 20 min"),
        (86_400_000 * 2 + 3_600_000 * 4, "2 d 4 h"),
        (u64::MAX, "213503982334 d 14 h"),
    ] {
        assert_eq!(duration_words(ms), words, "{ms} ms");
    }
}

/// With `hold = "needed"` a fair-share update brings the gang's expected start up to date
/// though no node with room heartbeats: here a node is lost while every other is full, and
/// the gang can no longer expect to start when the running jobs' limits end.
#[test]
fn a_reserving_gang_expects_its_start_as_of_the_last_update() {
    let (mut s, mut d) = reserving_gang();
    // A short job backfills the node the gang holds: every node is full.
    d.start(&mut s, 200, limited("filler", 1, 500, 500, false))
        .unwrap();
    d.run(&mut s, 200, 200, 100);
    let why = |s: &Scheduler, t| {
        s.snapshot(t).operations["g"]
            .why
            .clone()
            .unwrap_or_default()
    };
    assert!(
        why(&s, 200).contains("expected to start at 1000 ms"),
        "{}",
        why(&s, 200)
    );
    let lost = s.nodes().next().unwrap().id.clone();
    s.remove_node(300, &lost).unwrap();
    d.run(&mut s, 300, 400, 100);
    // Two nodes are left for three jobs.
    assert!(
        why(&s, 400).contains("holds the reservation, with no expected start"),
        "{}",
        why(&s, 400)
    );
}

/// `hold = "planned"` (conservative backfilling): every waiting gang has a planned start, and
/// a later gang starts ahead of one only where that does not delay it; with `needed` (EASY)
/// only the head's start is kept. On 10 nodes, `j0` (6 nodes, 10 s) runs; `j1` (6) is
/// expected to start when it ends, `j2` (8) when `j1` ends, and `j3` (4 nodes, 35 s) fits now
/// beside `j0`, on what `j1` will not need, but would delay `j2`.
#[test]
fn with_planned_starts_no_gang_delays_one_planned_before_it() {
    for hold in ["needed", "planned"] {
        let mut s = one_cpu_nodes(hold, 10);
        let mut d = Driver::new();
        let job = |id: &str, jobs: u32, ms: u64| limited(id, jobs, ms, ms, true);
        d.start(&mut s, 0, job("j0", 6, 10_000)).unwrap();
        d.run(&mut s, 0, 0, 100);
        for (id, jobs, ms) in [("j1", 6, 10_000), ("j2", 8, 10_000), ("j3", 4, 35_000)] {
            d.start(&mut s, 100, job(id, jobs, ms)).unwrap();
        }
        d.run(&mut s, 100, 80_000, 100);
        let first_start =
            |id: &str| first_start(&d, id).unwrap_or_else(|| panic!("{hold}: {id} never started"));
        let (j0, j1, j2, j3) = (
            first_start("j0"),
            first_start("j1"),
            first_start("j2"),
            first_start("j3"),
        );
        assert_eq!(j0, 0, "{hold}");
        assert!((10_000..=10_200).contains(&j1), "{hold}: j1 at {j1}");
        match hold {
            // j3 takes j1's spare nodes at once and j2 waits for it.
            "needed" => {
                assert!(j3 <= 200, "{hold}: j3 at {j3}");
                assert!(j2 >= j3 + 35_000, "{hold}: j2 at {j2}, j3 at {j3}");
            }
            // j2 starts when j1 ends; j3 is planned after it.
            _ => {
                assert!(
                    (j1 + 10_000..=j1 + 10_200).contains(&j2),
                    "{hold}: j2 at {j2}"
                );
                assert!(j3 >= j2 + 10_000, "{hold}: j3 at {j3}, j2 at {j2}");
            }
        }
    }
}

/// A gang starts whole, also when it gathers all it needs earlier than it expected: what it
/// held may then still be lent to a job that was to end by the expected time, and none of its
/// jobs starts until that job has ended and everything it holds is free. On three 1-cpu
/// nodes, `running` (limit 10 s) ends after 500 ms; meanwhile `g` (3 nodes) holds the other
/// two and lends one to `short` (limit and run 2 s), which ends by g's expected start (10 s).
/// g holds all three at 500 ms and starts when `short` has ended, on each node at its next
/// heartbeat (within one heartbeat period: the driver heartbeats every 100 ms).
#[test]
fn a_gang_that_gathers_early_starts_whole_once_what_it_lent_is_back() {
    for hold in ["needed", "all_free"] {
        let mut s = one_cpu_nodes(hold, 3);
        let mut d = Driver::new();
        d.start(&mut s, 0, limited("running", 1, 10_000, 500, true))
            .unwrap();
        d.run(&mut s, 0, 0, 100);
        d.start(&mut s, 100, limited("g", 3, 5000, 1000, true))
            .unwrap();
        d.run(&mut s, 100, 200, 100);
        d.start(&mut s, 300, limited("short", 1, 2000, 2000, true))
            .unwrap();
        d.run(&mut s, 300, 1000, 100);
        // All held at 500 ms, one node still lent: the gang says so.
        let why = s.snapshot(1000).operations["g"]
            .why
            .clone()
            .unwrap_or_default();
        if hold == "all_free" {
            assert!(
                why.contains(
                    "all its 3 pending jobs are held on 3 nodes; they start together \
                     once what it lent meanwhile is free again: jobs expected to end before it \
                     needed them still run on 1 of those nodes (node-"
                ),
                "{hold}: {why}"
            );
        }
        d.run(&mut s, 1100, 6000, 100);
        let times = |kind: &str, id: &str| -> Vec<u64> {
            events(&d, kind, id)
                .iter()
                .map(|e| e["t_ms"].as_u64().unwrap())
                .collect()
        };
        let short = times("allocation_started", "short");
        assert_eq!(
            short.len(),
            1,
            "{hold}: short borrows a held node: {short:?}"
        );
        let short_end = times("allocation_finished", "short")[0];
        let g = times("allocation_started", "g");
        assert_eq!(g.len(), 3, "{hold}: {g:?}");
        let (first, last) = (g.iter().min().unwrap(), g.iter().max().unwrap());
        assert!(last - first <= 100, "{hold}: g started in parts at {g:?}");
        assert!(
            *first >= short_end,
            "{hold}: g at {g:?}, short ended at {short_end}"
        );
    }
}

/// While a gang that holds all it needs waits for what it lent, it is not about to start and
/// needs nothing else: another gang may take what it does not hold, however long it runs. On
/// four 1-cpu nodes, `running` (2 nodes) ends after 500 ms; `g` (3 nodes) holds the two
/// others and lends one to `short` (2 s); at 500 ms g holds three nodes, and `long` (100 s,
/// submitted then) takes the fourth at once instead of waiting for g to start.
#[test]
fn a_gang_waiting_for_what_it_lent_leaves_the_rest_to_others() {
    let mut s = one_cpu_nodes("all_free", 4);
    let mut d = Driver::new();
    d.start(&mut s, 0, limited("running", 2, 10_000, 500, true))
        .unwrap();
    d.run(&mut s, 0, 0, 100);
    d.start(&mut s, 100, limited("g", 3, 5000, 1000, true))
        .unwrap();
    d.run(&mut s, 100, 200, 100);
    d.start(&mut s, 300, limited("short", 1, 2000, 2000, true))
        .unwrap();
    d.run(&mut s, 300, 500, 100);
    d.start(&mut s, 600, limited("long", 1, 100_000, 100_000, true))
        .unwrap();
    d.run(&mut s, 600, 6000, 100);
    let first = |id: &str| first_start(&d, id).unwrap_or_else(|| panic!("{id} never started"));
    assert!(first("short") <= 400, "short at {}", first("short"));
    assert!(first("long") <= 700, "long at {}", first("long"));
    assert!(first("g") >= first("short") + 2000, "g at {}", first("g"));
}

/// A gang placed whole on what the assembling gang lent it starts on its nodes at their next
/// heartbeats; until it has, that room stays its: the assembling gang, complete meanwhile,
/// does not take it (both would start in parts). Nodes heartbeat in an order of the test's:
/// `running` holds node-0 (of three 1-cpu nodes); `g` (3 nodes) holds node-1 and node-2;
/// `p` (2 nodes, 1 s) is placed whole on them at a heartbeat of node-3 (half a cpu, where
/// `tiny` then starts), so none of its jobs has started when node-0's job ends and g holds
/// all it needs.
#[test]
fn a_gang_never_takes_what_it_lent_to_a_gang_placed_whole() {
    let mut s = one_cpu_nodes("all_free", 3);
    s.add_node(
        0,
        fairsched_core::NodeSpec {
            id: fairsched_core::NodeId("node-3".into()),
            resources: res(0.5, 1.0),
            tags: Default::default(),
        },
    )
    .unwrap();
    let node = |i: usize| fairsched_core::NodeId(format!("node-{i}"));
    let beat =
        |s: &mut Scheduler, t: u64, i: usize, finished: Vec<fairsched_core::AllocationId>| {
            s.tick(t);
            let finished = finished
                .into_iter()
                .map(|allocation| fairsched_core::FinishedAllocation {
                    allocation,
                    outcome: fairsched_core::JobOutcome::Completed,
                })
                .collect();
            let r = s
                .process_heartbeat(t, &node(i), fairsched_core::NodeHeartbeat { finished })
                .expect("heartbeat");
            r.start
                .iter()
                .map(|o| (o.operation.0.clone(), o.allocation))
                .collect::<Vec<_>>()
        };
    s.start_op(0, untimed(limited("running", 1, 10_000, 0, true)))
        .unwrap();
    let running = beat(&mut s, 0, 0, vec![]);
    assert_eq!(running.len(), 1);
    s.start_op(100, untimed(limited("g", 3, 5000, 0, true)))
        .unwrap();
    for i in [1, 2] {
        beat(&mut s, 100, i, vec![]);
    }
    beat(&mut s, 200, 1, vec![]);
    s.start_op(300, untimed(limited("p", 2, 1000, 0, true)))
        .unwrap();
    let mut tiny = task(1, res(0.5, 1.0), None);
    tiny.spec.time_limit_ms = Some(1000);
    s.start_op(300, op("tiny", Some("q"), vec![tiny])).unwrap();
    let at_3 = beat(&mut s, 400, 3, vec![]);
    assert_eq!(at_3.len(), 1, "tiny starts at node-3: {at_3:?}");
    assert_eq!(at_3[0].0, "tiny");
    // node-0's job ends: g holds all it needs, but node-1 and node-2 are p's until p starts.
    let at_0 = beat(&mut s, 500, 0, vec![running[0].1]);
    assert!(at_0.is_empty(), "g started in parts at node-0: {at_0:?}");
    for i in [1, 2] {
        let here = beat(&mut s, 500, i, vec![]);
        assert_eq!(
            here.iter().map(|(o, _)| o.as_str()).collect::<Vec<_>>(),
            ["p"],
            "node-{i} starts p's job"
        );
    }
}

/// `op` with jobs that run until the test ends them.
fn untimed(mut op: TestOp) -> TestOp {
    for t in &mut op.tasks {
        t.duration_ms = None;
    }
    op
}

/// A gang that loses one of its running jobs (the job fails, or its node is lost or disabled)
/// does not go on in part: its other running jobs are aborted (reason `gang_member_lost`, sent
/// to their nodes) and it is placed whole again. Three 1-cpu nodes; the 2-job gang `g` runs
/// on two of them.
#[test]
fn a_gang_that_loses_a_job_runs_again_whole() {
    use fairsched_core::{FinishedAllocation, JobOutcome, NodeHeartbeat, NodeId};
    for case in ["failed", "node_lost", "node_disabled"] {
        let mut s = one_cpu_nodes("all_free", 3);
        let nodes: Vec<NodeId> = s.nodes().map(|n| n.id.clone()).collect();
        let beat = |s: &mut Scheduler, t: u64, node: &NodeId, finished: Vec<FinishedAllocation>| {
            s.tick(t);
            s.process_heartbeat(t, node, NodeHeartbeat { finished })
                .expect("heartbeat")
        };
        s.start_op(0, untimed(limited("g", 2, 10_000, 0, true)))
            .unwrap();
        let mut started = Vec::new();
        for n in &nodes {
            for o in beat(&mut s, 0, n, vec![]).start {
                started.push((o.allocation, n.clone()));
            }
        }
        assert_eq!(started.len(), 2, "{case}: g runs whole");
        s.take_events();
        let (lost, lost_node) = started[0].clone();
        let (sibling, sibling_node) = started[1].clone();
        // (The failed job's node heartbeats: g may start a job there again at once.)
        let mut again = 0;
        match case {
            "failed" => {
                let failed = FinishedAllocation {
                    allocation: lost,
                    outcome: JobOutcome::Failed,
                };
                again += beat(&mut s, 100, &lost_node, vec![failed]).start.len();
            }
            "node_lost" => s.remove_node(100, &lost_node).unwrap(),
            _ => s
                .set_node(100, &lost_node, None, None, Some(false))
                .unwrap(),
        }
        let events: Vec<Value> = s
            .take_events()
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        let sibling_end: Vec<&Value> = events
            .iter()
            .filter(|e| e["allocation"] == sibling.0)
            .collect();
        assert_eq!(sibling_end.len(), 1, "{case}: {events:?}");
        assert_eq!(sibling_end[0]["event"], "allocation_preempted", "{case}");
        assert_eq!(sibling_end[0]["reason"], "gang_member_lost", "{case}");
        // Its node is told to stop it, and g runs whole again on the two nodes left.
        let response = beat(&mut s, 200, &sibling_node, vec![]);
        assert!(response.abort.contains(&sibling), "{case}: {response:?}");
        again += response.start.len();
        let left: Vec<NodeId> = s.nodes().map(|n| n.id.clone()).collect();
        for t in [200, 300] {
            for n in left.iter().filter(|n| t == 300 || **n != sibling_node) {
                again += beat(&mut s, t, n, vec![]).start.len();
            }
        }
        assert_eq!(again, 2, "{case}: g starts again whole");
        let g = s.operation(&OperationId("g".into())).unwrap();
        assert_eq!(g.allocations.len(), 2, "{case}");
    }
}
