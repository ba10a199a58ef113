//! What every store does, whatever keeps it.

use super::{Case, Place};
use fairsched_store::{
    Batch, EventFilter, JobExit, OperationFilter, Pruned, StoredEvent, StoredJob, StoredNode,
    StoredOperation, StoredTree,
};

pub(crate) const CASES: &[Case] = &[
    ("round trip and restart", round_trip_and_restart),
    (
        "a reader sees what is committed since it was opened",
        a_reader_sees_what_is_committed_since,
    ),
    ("event filters", event_filters),
    (
        "operations are listed by filter in pages",
        operations_are_listed_by_filter_in_pages,
    ),
    (
        "prune removes old finished operations, their jobs and old events in batches",
        prune_in_batches,
    ),
    (
        "a late job exit updates the stored job",
        a_late_job_exit_updates_the_stored_job,
    ),
    (
        "several trees with one default",
        several_trees_with_one_default,
    ),
    (
        "a row twice in one batch: the later one wins, in the place of the first",
        a_row_twice_in_one_batch,
    ),
    (
        "a batch that fails writes nothing",
        a_failed_batch_writes_nothing,
    ),
];

fn op(id: &str, state: &str) -> StoredOperation {
    StoredOperation {
        id: id.into(),
        state: state.into(),
        record: format!("{{\"id\":\"{id}\"}}"),
        ..StoredOperation::default()
    }
}

fn tree(name: &str, config: &str, is_default: bool) -> StoredTree {
    StoredTree {
        name: name.into(),
        config: config.into(),
        is_default,
    }
}

fn finished(id: &str, state: &str, pool: &str, user: &str, at: u64) -> StoredOperation {
    StoredOperation {
        id: id.into(),
        state: state.into(),
        pool: pool.into(),
        user: user.into(),
        finished_at: fairsched_store::FINISHED_STATES
            .contains(&state)
            .then_some(at),
        record: format!("{{\"id\":\"{id}\"}}"),
    }
}

fn job(id: &str, operation: &str) -> StoredJob {
    StoredJob {
        id: id.into(),
        operation: operation.into(),
        record: format!("{{\"id\":\"{id}\",\"state\":\"aborted\"}}"),
        stdout_tail: None,
        stderr_tail: None,
    }
}

fn event(seq: u64, kind: &str, operation: Option<&str>, node: Option<&str>) -> StoredEvent {
    StoredEvent {
        seq,
        unix_ms: 1000 + seq * 10,
        kind: kind.into(),
        operation: operation.map(Into::into),
        node: node.map(Into::into),
        job: operation.map(|_| format!("0.{seq}")),
        record: format!("{{\"event\":\"{kind}\"}}"),
    }
}

fn all_operations() -> OperationFilter {
    OperationFilter {
        limit: 100,
        ..OperationFilter::default()
    }
}

fn round_trip_and_restart(place: &Place) {
    {
        let mut s = place.open();
        assert_eq!(s.load().unwrap().incarnation, 0);
        s.check_writable().unwrap();
        s.commit(&Batch {
            trees: vec![tree("default", "{}", true)],
            operations: vec![op("b", "running"), op("a", "running")],
            jobs: vec![StoredJob {
                id: "0.1".into(),
                operation: "b".into(),
                record: "{}".into(),
                stdout_tail: None,
                stderr_tail: None,
            }],
            nodes: vec![StoredNode {
                id: "n1".into(),
                record: "{\"slots\":4}".into(),
            }],
            events: vec![StoredEvent {
                seq: 1,
                unix_ms: 5,
                kind: "x".into(),
                record: "{}".into(),
                ..StoredEvent::default()
            }],
            ..Batch::default()
        })
        .unwrap();
        // An update keeps the submission order and earlier logs.
        s.commit(&Batch {
            operations: vec![op("b", "completed")],
            jobs: vec![StoredJob {
                id: "0.1".into(),
                operation: "b".into(),
                record: "{\"done\":true}".into(),
                stdout_tail: Some("hi\n".into()),
                stderr_tail: Some(String::new()),
            }],
            ..Batch::default()
        })
        .unwrap();
        // An empty batch changes nothing.
        s.commit(&Batch::default()).unwrap();
    }
    let s = place.open();
    let loaded = s.load().unwrap();
    assert_eq!(loaded.incarnation, 1);
    assert_eq!(loaded.trees, vec![tree("default", "{}", true)]);
    // The finished operation and its jobs stay in the store, not in what is loaded.
    let ids: Vec<_> = loaded
        .operations
        .iter()
        .map(|o| (o.id.as_str(), o.state.as_str()))
        .collect();
    assert_eq!(ids, vec![("a", "running")]);
    assert!(loaded.jobs.is_empty());
    let (b, b_jobs) = s.operation("b").unwrap().unwrap();
    assert_eq!(b.state, "completed");
    assert_eq!(b_jobs[0].record, "{\"done\":true}");
    assert!(s.operation("c").unwrap().is_none());
    assert_eq!(
        s.operation_state("b").unwrap().as_deref(),
        Some("completed")
    );
    assert_eq!(s.operation_state("c").unwrap(), None);
    assert_eq!(
        s.job_logs("b").unwrap(),
        vec![("0.1".into(), "hi\n".into(), String::new())]
    );
    // Submission order: b before a, though b was updated later.
    let listed: Vec<String> = s
        .operations(&all_operations())
        .unwrap()
        .into_iter()
        .map(|o| o.id)
        .collect();
    assert_eq!(listed, ["b", "a"]);
    assert_eq!(s.recent_events(10).unwrap().len(), 1);
    assert_eq!(loaded.last_event_seq, 1);
    assert_eq!(
        loaded.nodes,
        vec![StoredNode {
            id: "n1".into(),
            record: "{\"slots\":4}".into(),
        }]
    );
    drop(s);
    assert_eq!(place.open().load().unwrap().incarnation, 2);
}

/// A reader sees every commit made after it was opened, and before each of its reads.
fn a_reader_sees_what_is_committed_since(place: &Place) {
    let mut s = place.open();
    let reader = s.reader().unwrap();
    assert_eq!(reader.operation_state("a").unwrap(), None);
    for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
        s.commit(&Batch {
            operations: vec![op(id, "running")],
            ..Batch::default()
        })
        .unwrap();
        assert_eq!(
            reader.operation_state(id).unwrap().as_deref(),
            Some("running")
        );
        assert_eq!(reader.operations(&all_operations()).unwrap().len(), i + 1);
        s.commit(&Batch {
            operations: vec![op(id, "completed")],
            events: vec![event(i as u64 + 1, "operation_state", Some(id), None)],
            ..Batch::default()
        })
        .unwrap();
        assert_eq!(
            reader.operation_state(id).unwrap().as_deref(),
            Some("completed")
        );
        assert_eq!(reader.recent_events(10).unwrap().len(), i + 1);
    }
}

fn event_filters(place: &Place) {
    let mut s = place.open();
    s.commit(&Batch {
        events: vec![
            event(1, "allocation_started", Some("a"), Some("n1")),
            event(2, "allocation_started", Some("b"), Some("n2")),
            event(3, "operation_state", Some("a"), None),
            event(4, "node_changed", None, Some("n1")),
            event(5, "allocation_finished", Some("a"), Some("n1")),
        ],
        ..Batch::default()
    })
    .unwrap();
    let f = EventFilter::default;
    let by_op = |op: &str| EventFilter {
        operation: Some(op.into()),
        ..f()
    };
    let table: Vec<(&str, EventFilter, &[u64])> = vec![
        ("no filter", f(), &[1, 2, 3, 4, 5]),
        ("operation", by_op("a"), &[1, 3, 5]),
        (
            "node",
            EventFilter {
                node: Some("n1".into()),
                ..f()
            },
            &[1, 4, 5],
        ),
        (
            "job",
            EventFilter {
                job: Some("0.2".into()),
                ..f()
            },
            &[2],
        ),
        (
            "kinds",
            EventFilter {
                kinds: vec!["allocation_started".into(), "node_changed".into()],
                ..f()
            },
            &[1, 2, 4],
        ),
        (
            "operation after a sequence number",
            EventFilter {
                after_seq: Some(1),
                ..by_op("a")
            },
            &[3, 5],
        ),
        (
            "since a time",
            EventFilter {
                since_unix_ms: Some(1030),
                ..f()
            },
            &[3, 4, 5],
        ),
        (
            "operation and node",
            EventFilter {
                node: Some("n1".into()),
                ..by_op("a")
            },
            &[1, 5],
        ),
        ("unknown operation", by_op("zz"), &[]),
        // A limit keeps the newest, or the first from a point on.
        (
            "limit: the newest",
            EventFilter { limit: 2, ..f() },
            &[4, 5],
        ),
        (
            "limit after a sequence number: the first ones",
            EventFilter {
                after_seq: Some(0),
                limit: 2,
                ..f()
            },
            &[1, 2],
        ),
        (
            "limit since a time: the first ones",
            EventFilter {
                since_unix_ms: Some(1020),
                limit: 2,
                ..f()
            },
            &[2, 3],
        ),
    ];
    for (what, filter, expected) in table {
        let filter = EventFilter {
            limit: if filter.limit == 0 { 100 } else { filter.limit },
            ..filter
        };
        let seqs: Vec<u64> = s.events(&filter).unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, expected, "{what}: {filter:?}");
    }
    // Every field comes back as it was committed.
    let e = &s
        .events(&EventFilter {
            after_seq: Some(4),
            limit: 1,
            ..f()
        })
        .unwrap()[0];
    assert_eq!(e, &event(5, "allocation_finished", Some("a"), Some("n1")));
    assert_eq!(s.load().unwrap().last_event_seq, 5);
}

fn operations_are_listed_by_filter_in_pages(place: &Place) {
    let mut s = place.open();
    let ops = vec![
        finished("o1", "completed", "a", "u1", 10),
        finished("o2", "running", "b", "u2", 0),
        finished("o3", "failed", "a", "u2", 30),
        finished("o4", "aborted", "c", "u1", 40),
        finished("o5", "pending", "a", "u1", 0),
    ];
    s.commit(&Batch {
        operations: ops.clone(),
        ..Batch::default()
    })
    .unwrap();
    let f = all_operations;
    let table: Vec<(&str, OperationFilter, &[&str])> = vec![
        ("no filter", f(), &["o1", "o2", "o3", "o4", "o5"]),
        (
            "states",
            OperationFilter {
                states: vec!["completed".into(), "failed".into()],
                ..f()
            },
            &["o1", "o3"],
        ),
        (
            "pools and user",
            OperationFilter {
                pools: Some(vec!["a".into(), "c".into()]),
                user: Some("u1".into()),
                ..f()
            },
            &["o1", "o4", "o5"],
        ),
        (
            "no pool",
            OperationFilter {
                pools: Some(Vec::new()),
                ..f()
            },
            &[],
        ),
        (
            "user and state",
            OperationFilter {
                user: Some("u2".into()),
                states: vec!["running".into()],
                ..f()
            },
            &["o2"],
        ),
        // Pages: the newest without a cursor; the first ones after a cursor ("": the start).
        (
            "the newest",
            OperationFilter { limit: 2, ..f() },
            &["o4", "o5"],
        ),
        (
            "the first",
            OperationFilter {
                after: Some(String::new()),
                limit: 2,
                ..f()
            },
            &["o1", "o2"],
        ),
        (
            "after o2",
            OperationFilter {
                after: Some("o2".into()),
                limit: 2,
                ..f()
            },
            &["o3", "o4"],
        ),
        (
            "after o4",
            OperationFilter {
                after: Some("o4".into()),
                limit: 2,
                ..f()
            },
            &["o5"],
        ),
        (
            "after o1, in pool a",
            OperationFilter {
                after: Some("o1".into()),
                pools: Some(vec!["a".into()]),
                ..f()
            },
            &["o3", "o5"],
        ),
    ];
    for (what, filter, expected) in table {
        let ids: Vec<String> = s
            .operations(&filter)
            .unwrap()
            .into_iter()
            .map(|o| o.id)
            .collect();
        assert_eq!(ids, expected, "{what}: {filter:?}");
    }
    // Every field comes back as it was committed.
    assert_eq!(s.operations(&f()).unwrap(), ops);
    let e = s
        .operations(&OperationFilter {
            after: Some("nope".into()),
            limit: 1,
            ..OperationFilter::default()
        })
        .unwrap_err();
    assert!(e.to_string().contains("\"nope\""), "{e}");
}

fn prune_in_batches(place: &Place) {
    let mut s = place.open();
    s.commit(&Batch {
        operations: vec![
            finished("old1", "completed", "a", "u", 100),
            finished("old2", "aborted", "a", "u", 200),
            finished("new", "completed", "a", "u", 5000),
            finished("live", "running", "a", "u", 0),
        ],
        jobs: vec![
            job("1", "old1"),
            job("2", "old2"),
            job("3", "new"),
            job("4", "live"),
            job("5", "old2"),
        ],
        events: (1..=5)
            .map(|seq| StoredEvent {
                seq,
                unix_ms: seq * 100,
                kind: "x".into(),
                record: "{}".into(),
                ..StoredEvent::default()
            })
            .collect(),
        ..Batch::default()
    })
    .unwrap();
    // One operation per call: the oldest first.
    let p = s.prune(1000, 1, 2).unwrap();
    assert_eq!(
        p,
        Pruned {
            operations: 1,
            jobs: 1,
            events: 2
        }
    );
    assert!(s.operation("old1").unwrap().is_none());
    assert!(s.operation("old2").unwrap().is_some());
    let p = s.prune(1000, 10, 10).unwrap();
    // The newest event (5, at 500 ms) stays: it numbers the next ones.
    assert_eq!(
        p,
        Pruned {
            operations: 1,
            jobs: 2,
            events: 2
        }
    );
    assert_eq!(s.prune(1000, 10, 10).unwrap(), Pruned::default());
    assert!(s.operation("new").unwrap().is_some());
    assert_eq!(s.operation("live").unwrap().unwrap().1.len(), 1);
    assert_eq!(s.load().unwrap().last_event_seq, 5);
    let left: Vec<u64> = s
        .events(&EventFilter {
            limit: 10,
            ..EventFilter::default()
        })
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(left, [5]);
    assert_eq!(s.job_logs("old2").unwrap(), vec![]);
    // Nothing is older than the retention: nothing goes.
    assert_eq!(s.prune(0, 10, 10).unwrap(), Pruned::default());
}

fn a_late_job_exit_updates_the_stored_job(place: &Place) {
    let mut s = place.open();
    let mut with_code = job("2", "o");
    with_code.record = r#"{"id":"2","exit_code":0,"reason":"done"}"#.into();
    s.commit(&Batch {
        operations: vec![finished("o", "aborted", "a", "u", 1)],
        jobs: vec![job("1", "o"), with_code],
        ..Batch::default()
    })
    .unwrap();
    s.commit(&Batch {
        job_exits: vec![
            JobExit {
                id: "1".into(),
                exit_code: Some(143),
                reason: None,
                // Output is any text, NUL bytes included.
                stdout_tail: "o\0ut".into(),
                stderr_tail: "err".into(),
            },
            // A job that has an exit code keeps it; a reason given replaces its reason.
            JobExit {
                id: "2".into(),
                exit_code: Some(9),
                reason: Some("killed".into()),
                stdout_tail: "o2".into(),
                stderr_tail: String::new(),
            },
            // An unknown job changes nothing.
            JobExit {
                id: "9".into(),
                ..JobExit::default()
            },
        ],
        ..Batch::default()
    })
    .unwrap();
    let (_, jobs) = s.operation("o").unwrap().unwrap();
    let record = |i: usize| -> serde_json::Value { serde_json::from_str(&jobs[i].record).unwrap() };
    assert_eq!(record(0)["exit_code"], 143);
    assert_eq!(record(0)["state"], "aborted");
    assert_eq!(record(1)["exit_code"], 0);
    assert_eq!(record(1)["reason"], "killed");
    assert_eq!(
        s.job_logs("o").unwrap(),
        vec![
            ("1".into(), "o\0ut".into(), "err".into()),
            ("2".into(), "o2".into(), String::new())
        ]
    );
    assert!(s.operation("9").unwrap().is_none());
}

fn several_trees_with_one_default(place: &Place) {
    {
        let mut s = place.open();
        s.commit(&Batch {
            trees: vec![tree("gpu", "{}", false), tree("physical", "{}", true)],
            ..Batch::default()
        })
        .unwrap();
        // A change of one tree leaves the others (and the default) as they are.
        s.commit(&Batch {
            trees: vec![tree("gpu", r#"{"pools":{"a":{}}}"#, false)],
            ..Batch::default()
        })
        .unwrap();
    }
    let mut s = place.open();
    assert_eq!(
        s.load().unwrap().trees,
        vec![
            tree("gpu", r#"{"pools":{"a":{}}}"#, false),
            tree("physical", "{}", true)
        ]
    );
    // Another default: the former one is no longer the default.
    s.commit(&Batch {
        trees: vec![tree("gpu", "{}", true)],
        ..Batch::default()
    })
    .unwrap();
    assert_eq!(
        s.load().unwrap().trees,
        vec![tree("gpu", "{}", true), tree("physical", "{}", false)]
    );
    // Two defaults in one batch: the later one is.
    s.commit(&Batch {
        trees: vec![tree("a", "{}", true), tree("physical", "{}", true)],
        ..Batch::default()
    })
    .unwrap();
    let defaults: Vec<String> = s
        .load()
        .unwrap()
        .trees
        .into_iter()
        .filter(|t| t.is_default)
        .map(|t| t.name)
        .collect();
    assert_eq!(defaults, ["physical"]);
}

/// A batch is applied as if row by row: a row given twice ends as the later one, in the
/// submission (start) order of the first; a job's output tails stay until new ones are given.
fn a_row_twice_in_one_batch(place: &Place) {
    let mut s = place.open();
    let mut tailed = job("j1", "x");
    tailed.stdout_tail = Some("first".into());
    let mut later = job("j1", "x");
    later.record = "{\"v\":2}".into();
    s.commit(&Batch {
        operations: vec![op("x", "pending"), op("y", "running"), op("x", "running")],
        jobs: vec![tailed, job("j2", "x"), later],
        nodes: vec![
            StoredNode {
                id: "n".into(),
                record: "1".into(),
            },
            StoredNode {
                id: "n".into(),
                record: "2".into(),
            },
        ],
        ..Batch::default()
    })
    .unwrap();
    let listed: Vec<(String, String)> = s
        .operations(&all_operations())
        .unwrap()
        .into_iter()
        .map(|o| (o.id, o.state))
        .collect();
    assert_eq!(
        listed,
        [
            ("x".to_string(), "running".to_string()),
            ("y".into(), "running".into())
        ]
    );
    let (_, jobs) = s.operation("x").unwrap().unwrap();
    let jobs: Vec<(&str, &str, Option<&str>)> = jobs
        .iter()
        .map(|j| (j.id.as_str(), j.record.as_str(), j.stdout_tail.as_deref()))
        .collect();
    let j2 = job("j2", "x").record;
    assert_eq!(
        jobs,
        [
            ("j1", "{\"v\":2}", Some("first")),
            ("j2", j2.as_str(), None)
        ]
    );
    let loaded = s.load().unwrap();
    assert_eq!(loaded.nodes.len(), 1);
    assert_eq!(loaded.nodes[0].record, "2");
    assert_eq!(loaded.jobs.len(), 2);
}

/// All or nothing: a batch with an event whose number is taken fails and leaves no trace.
fn a_failed_batch_writes_nothing(place: &Place) {
    let mut s = place.open();
    s.commit(&Batch {
        events: vec![event(1, "x", None, None)],
        ..Batch::default()
    })
    .unwrap();
    let bad = Batch {
        trees: vec![tree("t", "{}", true)],
        operations: vec![op("o", "running")],
        jobs: vec![job("1", "o")],
        nodes: vec![StoredNode {
            id: "n".into(),
            record: "{}".into(),
        }],
        events: vec![event(2, "y", None, None), event(1, "z", None, None)],
        ..Batch::default()
    };
    assert!(s.commit(&bad).is_err());
    let loaded = s.load().unwrap();
    assert!(loaded.trees.is_empty());
    assert!(loaded.operations.is_empty());
    assert!(loaded.jobs.is_empty());
    assert!(loaded.nodes.is_empty());
    assert_eq!(loaded.last_event_seq, 1);
    assert_eq!(s.recent_events(10).unwrap()[0].kind, "x");
    // The store goes on: the next batch commits.
    s.commit(&Batch {
        operations: vec![op("o", "running")],
        ..Batch::default()
    })
    .unwrap();
    assert_eq!(s.load().unwrap().operations.len(), 1);
}
