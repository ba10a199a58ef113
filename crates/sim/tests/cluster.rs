//! The simulated cluster (`fairsched_sim::cluster`) driven directly over a real core: when
//! jobs end, what interruptions and aborts do, which nodes have room, and nodes that come and
//! go. Each test is a table of cases run through one helper.

use fairsched_config::{PoolTreeConfig, PoolTrees, validate_pool_trees};
use fairsched_core::{
    AllocationId, Event, EventKind, FinishedAllocation, JobOutcome, Millis, NodeId, NodeSpec,
    OperationId, OperationSpec, Scheduler, SchedulerConfig,
};
use fairsched_resources::Resources;
use fairsched_sim::cluster::{Cluster, JobModel, JobRef};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A cluster around a core with one tree `default` (`tree`: its `config` and `pools`) and
/// `nodes` nodes `n0`, `n1`, ... of `resources`.
fn cluster(tree: Value, nodes: usize, resources: Value) -> Cluster {
    let tree: PoolTreeConfig = serde_json::from_value(tree).expect("a pool tree");
    let trees = validate_pool_trees(&PoolTrees::single("default", tree)).expect("valid");
    let config = SchedulerConfig {
        fair_share_update_period_ms: 100,
        ..SchedulerConfig::default()
    };
    let mut cluster = Cluster::new(Scheduler::new(config, trees).expect("a core"));
    let resources: Resources = serde_json::from_value(resources).expect("resources");
    for i in 0..nodes {
        let spec = NodeSpec {
            id: NodeId(format!("n{i}")),
            resources,
            tags: Default::default(),
        };
        assert_eq!(cluster.add_node(0, spec), Ok(i));
    }
    cluster
}

fn start(cluster: &mut Cluster, t: Millis, spec: Value) {
    let spec: OperationSpec = serde_json::from_value(spec).expect("an operation");
    cluster
        .call(|core| core.start_operation(t, spec))
        .expect("accepted");
}

/// The model of every job of operation `op`: `models[op]`, tagged with its index.
fn models(list: &[(&str, JobModel)]) -> BTreeMap<String, JobModel> {
    list.iter()
        .enumerate()
        .map(|(i, (op, m))| (op.to_string(), m.with_tag(i)))
        .collect()
}

/// One step at `t` as the scenario runner takes it: a tick, then every node heartbeats once,
/// reporting what exited by `t`. Returns what started and was aborted, and the core's events.
fn step(
    cluster: &mut Cluster,
    t: Millis,
    models: &BTreeMap<String, JobModel>,
) -> (Vec<JobRef>, Vec<JobRef>, Vec<Event>) {
    let (mut started, mut aborted) = (Vec::new(), Vec::new());
    cluster.call(|core| core.tick(t));
    aborted.extend(cluster.deliver_orders(t).aborted);
    for n in cluster.node_numbers() {
        let finished = cluster.take_exited(n, t);
        let carried = cluster
            .heartbeat(t, n, finished, &mut |s| models.get(&s.operation.0).copied())
            .expect("heartbeat");
        started.extend(carried.started);
        aborted.extend(carried.aborted);
        aborted.extend(cluster.deliver_orders(t).aborted);
    }
    (started, aborted, cluster.core_mut().take_events())
}

fn completed(allocation: AllocationId) -> FinishedAllocation {
    FinishedAllocation {
        allocation,
        outcome: JobOutcome::Completed,
    }
}

#[test]
fn a_job_ends_at_its_duration() {
    // (duration, start time)
    let cases: [(Option<u64>, Millis); 5] = [
        (Some(0), 0),
        (Some(1), 0),
        (Some(250), 0),
        (Some(250), 100),
        (None, 0),
    ];
    for (duration, at) in cases {
        let case = format!("duration {duration:?} started at {at}");
        let mut c = cluster(json!({}), 1, json!({"cpu": 1, "user_slots": 1}));
        start(
            &mut c,
            at,
            json!({"id": "op", "user": "u", "tasks": [{"job_count": 1, "resources": {"cpu": 1}}]}),
        );
        let models = models(&[("op", JobModel::runs_for(duration))]);
        c.call(|core| core.update_fair_share(at));
        let carried = c
            .heartbeat(at, 0, Vec::new(), &mut |s| {
                models.get(&s.operation.0).copied()
            })
            .expect("heartbeat");
        assert_eq!(carried.started.len(), 1, "{case}");
        let job = carried.started[0];
        assert_eq!((job.node, job.tag), (0, 0), "{case}");
        let ends = duration.map(|d| at + d);
        assert_eq!(
            c.node(0).unwrap().job(job.allocation).unwrap().ends_at,
            ends
        );
        assert_eq!(c.next_end(), ends, "{case}");
        assert_eq!(c.running_jobs(), 1, "{case}");
        let Some(end) = ends else {
            assert!(c.end_jobs_due(Millis::MAX).is_empty(), "{case}");
            assert!(c.take_exited(0, Millis::MAX).is_empty(), "{case}");
            assert_eq!(c.running_jobs(), 1, "{case}: runs until ended");
            continue;
        };
        if end > 0 {
            assert!(c.end_jobs_due(end - 1).is_empty(), "{case}: not before");
            assert!(c.take_exited(0, end - 1).is_empty(), "{case}: not before");
        }
        let due = c.end_jobs_due(end);
        assert_eq!(due, BTreeMap::from([(0, vec![completed(job.allocation)])]));
        assert_eq!(c.running_jobs(), 0, "{case}");
        assert!(!c.has_ends(), "{case}");
        // Reported, it completes the operation.
        c.heartbeat(end, 0, due[&0].clone(), &mut |_| None)
            .expect("heartbeat");
        let events = c.core_mut().take_events();
        assert!(
            events.iter().any(|e| matches!(
                &e.kind,
                EventKind::AllocationFinished { allocation, .. } if *allocation == job.allocation
            ) && e.t_ms == end),
            "{case}: {events:?}"
        );
    }
}

#[test]
fn the_scenario_way_reports_a_job_at_the_first_heartbeat_after_its_end() {
    // (duration, heartbeat times, the time at which it is reported)
    let cases: [(u64, &[Millis], Millis); 3] = [
        (250, &[100, 200, 300, 400], 300),
        (300, &[100, 200, 300, 400], 300),
        (301, &[100, 400], 400),
    ];
    for (duration, times, reported) in cases {
        let mut c = cluster(json!({}), 1, json!({"cpu": 1, "user_slots": 1}));
        start(
            &mut c,
            0,
            json!({"id": "op", "user": "u", "tasks": [{"job_count": 1, "resources": {"cpu": 1}}]}),
        );
        let models = models(&[("op", JobModel::runs_for(Some(duration)))]);
        let (started, _, _) = step(&mut c, 0, &models);
        assert_eq!(started.len(), 1);
        for &t in times {
            let exited = c.take_exited(0, t);
            let expect = if t == reported {
                vec![completed(started[0].allocation)]
            } else {
                Vec::new()
            };
            assert_eq!(exited, expect, "duration {duration}, at {t}");
            if t >= reported {
                break;
            }
        }
    }
}

/// The interruption cases: a victim in an ephemeral pool is preempted at about 200 ms for a
/// 500 ms job of a guaranteed pool on a 1-cpu node.
#[test]
fn an_interrupted_job_exits_after_its_delay_or_at_the_deadline_and_its_preemptor_waits() {
    // (interruptible, exit_after_interrupt_ms, interruption timeout, the victim exits
    //  `Some(delay)` after the interruption, or is aborted at the deadline `None`)
    let cases: [(bool, u64, u64, Option<u64>); 5] = [
        (true, 300, 1000, Some(300)),
        (true, 0, 1000, Some(0)),
        (true, 1000, 1000, Some(1000)),
        (true, 1001, 1000, None),
        (false, 0, 1000, None),
    ];
    let claim = 500;
    for (interruptible, exit_after, timeout, exits_after) in cases {
        let case =
            format!("interruptible {interruptible}, exit after {exit_after}, timeout {timeout}");
        let mut c = cluster(
            json!({
                "config": {"fair_share_starvation_timeout_ms": 100, "preemptive_scheduling_backoff_ms": 0,
                           "max_unpreemptible_running_allocation_count": 0,
                           "preemption_satisfaction_threshold": 0.99},
                "pools": {"guaranteed": {"strong_guarantee_resources": {"cpu": 1}}}
            }),
            1,
            json!({"cpu": 1, "user_slots": 2}),
        );
        start(
            &mut c,
            0,
            json!({"id": "victim", "user": "u", "interruption_signal": "SIGINT", "interruption_timeout_ms": timeout,
                   "tasks": [{"job_count": 1, "resources": {"cpu": 1}}]}),
        );
        let victim_model = JobModel {
            interruptible,
            exit_after_interrupt_ms: exit_after,
            ..JobModel::runs_for(None)
        };
        let models = models(&[
            ("victim", victim_model),
            ("claimer", JobModel::runs_for(Some(claim))),
        ]);
        let (started, _, _) = step(&mut c, 0, &models);
        let victim = started[0].allocation;
        start(
            &mut c,
            200,
            json!({"id": "claimer", "pool": "guaranteed", "tasks": [{"job_count": 1, "resources": {"cpu": 1}}]}),
        );
        // Step until the victim is interrupted.
        let mut t = 200;
        let (interrupted_at, claimer) = loop {
            let (started, aborted, events) = step(&mut c, t, &models);
            assert!(aborted.is_empty(), "{case}: nothing aborted yet");
            if events
                .iter()
                .any(|e| matches!(e.kind, EventKind::AllocationInterrupted { .. }))
            {
                assert_eq!(started.len(), 1, "{case}: the claimer starts at once");
                break (t, started[0].allocation);
            }
            t += 100;
            assert!(t < 2000, "{case}: never interrupted");
        };
        let node = c.node(0).unwrap();
        let expect_end = exits_after.map(|d| interrupted_at + d);
        assert_eq!(node.job(victim).unwrap().ends_at, expect_end, "{case}");
        assert!(node.job(victim).unwrap().interrupted, "{case}");
        let waiting = node.job(claimer).unwrap();
        assert_eq!(
            (waiting.ends_at, waiting.waiting_for),
            (None, 1),
            "{case}: waits"
        );
        // The victim leaves: exits at its time, or is aborted at the first heartbeat at or
        // after the deadline.
        let left_at = expect_end.unwrap_or(interrupted_at + timeout);
        if let Some(end) = expect_end {
            let due = c.end_jobs_due(end);
            assert_eq!(due[&0], vec![completed(victim)], "{case}");
        } else {
            let carried = c
                .heartbeat(left_at, 0, Vec::new(), &mut |_| None)
                .expect("heartbeat");
            let tags: Vec<usize> = carried.aborted.iter().map(|j| j.tag).collect();
            assert_eq!(tags, [0], "{case}: the victim is aborted, with its tag");
        }
        let node = c.node(0).unwrap();
        assert!(node.job(victim).is_none(), "{case}");
        let runs = node.job(claimer).unwrap();
        assert_eq!(
            (runs.ends_at, runs.waiting_for),
            (Some(left_at + claim), 0),
            "{case}: the claimer runs its whole duration from then"
        );
        if left_at + claim > 0 {
            assert!(c.end_jobs_due(left_at + claim - 1).is_empty(), "{case}");
        }
        let due = c.end_jobs_due(left_at + claim);
        assert_eq!(due[&0], vec![completed(claimer)], "{case}");
        assert_eq!(c.running_jobs(), 0, "{case}");
    }
}

#[test]
fn an_abort_ends_jobs_at_once_and_hands_back_their_tags() {
    // (jobs, nodes)
    let cases: [(u32, usize); 3] = [(1, 1), (4, 2), (6, 3)];
    for (jobs, nodes) in cases {
        let mut c = cluster(json!({}), nodes, json!({"cpu": 2, "user_slots": 2}));
        start(
            &mut c,
            0,
            json!({"id": "other", "user": "u", "tasks": [{"job_count": 1, "resources": {"cpu": 0.5}}]}),
        );
        start(
            &mut c,
            0,
            json!({"id": "op", "user": "u", "tasks": [{"job_count": jobs, "resources": {"cpu": 0.5}}]}),
        );
        let models = models(&[
            ("other", JobModel::runs_for(None)),
            ("op", JobModel::runs_for(Some(1000))),
        ]);
        let (started, _, _) = step(&mut c, 0, &models);
        assert_eq!(started.len(), jobs as usize + 1);
        assert_eq!(c.running_jobs(), u64::from(jobs) + 1);
        c.call(|core| core.abort_operation(100, &OperationId("op".to_string())))
            .expect("aborted");
        let aborted = c.deliver_orders(100).aborted;
        let mut expect: Vec<JobRef> = started.iter().copied().filter(|j| j.tag == 1).collect();
        let mut got = aborted.clone();
        expect.sort_by_key(|j| j.allocation);
        got.sort_by_key(|j| j.allocation);
        assert_eq!(got, expect, "{jobs} jobs on {nodes} nodes");
        assert_eq!(c.running_jobs(), 1);
        let used: Resources = c.nodes().fold(Resources::ZERO, |sum, n| sum.add(n.used()));
        assert_eq!(
            used,
            serde_json::from_value(json!({"cpu": 0.5})).unwrap(),
            "only the other job holds resources"
        );
        // Their ends stay on the agenda, and pass by without reporting anything.
        assert_eq!(c.next_end(), Some(1000));
        assert!(c.end_jobs_due(1000).is_empty());
    }
}

#[test]
fn a_start_order_without_a_model_is_not_carried_out() {
    let mut c = cluster(json!({}), 1, json!({"cpu": 1, "user_slots": 1}));
    start(
        &mut c,
        0,
        json!({"id": "op", "user": "u", "tasks": [{"job_count": 1, "resources": {"cpu": 1}}]}),
    );
    let (started, _, _) = step(&mut c, 0, &BTreeMap::new());
    assert!(started.is_empty());
    assert_eq!(c.running_jobs(), 0);
    assert_eq!(c.node(0).unwrap().jobs().count(), 0);
    assert_eq!(c.next_end(), None);
    assert_eq!(c.core().allocations().count(), 1, "the core placed it");
}

#[test]
fn room_follows_the_jobs_on_each_node() {
    // (node resources, job resources, jobs started: the nodes with room after the start and
    //  after the jobs end)
    let slot_and_cpu = || json!({"cpu": 1, "user_slots": 1});
    let cases: [(Value, Value, u32, Vec<usize>); 4] = [
        (
            json!({"cpu": 1, "user_slots": 1}),
            slot_and_cpu(),
            2,
            vec![],
        ),
        // Both jobs go to the first node.
        (
            json!({"cpu": 2, "user_slots": 2}),
            slot_and_cpu(),
            2,
            vec![1],
        ),
        (
            json!({"cpu": 2, "user_slots": 2}),
            slot_and_cpu(),
            1,
            vec![0, 1],
        ),
        // Cpu left, but no user slot.
        (
            json!({"cpu": 2, "user_slots": 1}),
            slot_and_cpu(),
            2,
            vec![],
        ),
    ];
    for (node, job, count, with_room) in cases {
        let case = format!("{node} nodes, {count} jobs of {job}");
        let mut c = cluster(json!({}), 2, node);
        assert_eq!(c.nodes_with_room(), Vec::<usize>::new(), "not tracked");
        c.track_room();
        let needed: Resources = serde_json::from_value(job.clone()).unwrap();
        c.set_room_needed(needed);
        assert_eq!(
            c.nodes_with_room(),
            [0, 1],
            "{case}: every node until checked"
        );
        start(
            &mut c,
            0,
            json!({"id": "op", "user": "u", "tasks": [{"job_count": count, "resources": job}]}),
        );
        let models = models(&[("op", JobModel::runs_for(Some(10)))]);
        let (started, _, _) = step(&mut c, 0, &models);
        assert_eq!(started.len(), count as usize, "{case}");
        assert_eq!(c.nodes_with_room(), with_room, "{case}");
        assert_eq!(c.any_room(), !with_room.is_empty(), "{case}");
        c.end_jobs_due(10);
        assert_eq!(c.nodes_with_room(), [0, 1], "{case}: room again");
    }
}

#[test]
fn a_removed_node_takes_its_jobs_and_its_number_is_not_reused() {
    let mut c = cluster(json!({}), 3, json!({"cpu": 1, "user_slots": 1}));
    start(
        &mut c,
        0,
        json!({"id": "op", "user": "u", "tasks": [{"job_count": 3, "resources": {"cpu": 1}}]}),
    );
    let models = models(&[("op", JobModel::runs_for(None))]);
    step(&mut c, 0, &models);
    assert_eq!(c.running_jobs(), 3);
    c.remove_node(100, &NodeId("n1".to_string()))
        .expect("removed");
    assert!(c.deliver_orders(100).aborted.is_empty(), "the node is gone");
    assert_eq!(c.running_jobs(), 2);
    assert_eq!(c.node_numbers(), [0, 2]);
    assert!(c.node(1).is_none());
    assert_eq!(c.node_number(&NodeId("n1".to_string())), None);
    let spec = NodeSpec {
        id: NodeId("n3".to_string()),
        resources: serde_json::from_value(json!({"cpu": 1, "user_slots": 1})).unwrap(),
        tags: Default::default(),
    };
    assert_eq!(c.add_node(100, spec), Ok(3));
    assert_eq!(c.node_numbers(), [0, 2, 3]);
    let ids: Vec<&str> = c.nodes().map(|n| n.id().0.as_str()).collect();
    assert_eq!(ids, ["n0", "n2", "n3"]);
}
