//! The published view: a change shows in its records at once; the snapshot is taken again
//! only as often as the actor can afford, except after a change of a tree's pools.

use super::history_tests::{actor, ask, heartbeat, tick};
use super::*;
use crate::submit::Submission;

fn submit(actor: &mut Actor, id: &str) {
    let spec = json!({"id": id, "tasks": [{"job_count": 2, "resources": {"cpu": 1},
                      "command": ["true"]}]});
    ask(actor, |r| {
        Command::Submit(Box::new(Submission::parse(spec).unwrap()), false, r)
    })
    .unwrap();
}

/// The last published view.
fn published(actor: &Actor) -> Arc<View> {
    actor.publish.borrow().clone()
}

/// Makes the actor see its snapshots as expensive, one as just taken and the cluster as large:
/// views now show new records only (see `Actor::next_view`).
fn expensive_snapshots(actor: &mut Actor) {
    actor.snapshot_cost = Duration::from_secs(3600);
    actor.snapshot_taken_at = Instant::now();
    actor.small_cluster = 0;
}

#[test]
fn changes_show_in_the_records_at_once_while_the_snapshot_waits_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = actor(dir.path(), 3_600_000);
    super::history_tests::register_n1(&mut a);
    submit(&mut a, "first");
    expensive_snapshots(&mut a);
    let before = published(&a);

    // A submission: its record is in the next view, the snapshot is the one before.
    submit(&mut a, "second");
    let view = published(&a);
    assert!(Arc::ptr_eq(&view.snapshot, &before.snapshot));
    assert!(!view.snapshot.operations.contains_key("second"));
    let ids: Vec<&str> = view.operations.ids().collect();
    assert_eq!(ids, ["first", "second"]);
    let second = view.operations.get("second").unwrap();
    assert_eq!(second.counts.pending, 2);
    assert_eq!(second.counts.total, 2);
    assert_eq!(second.placements[..], [("default".into(), "root".into())]);

    // Jobs start: their operations' counts and the node's usage show at once.
    tick(&mut a);
    expensive_snapshots(&mut a);
    let started = heartbeat(&mut a, Vec::new()).start.len();
    assert_eq!(started, 4);
    let view = published(&a);
    assert!(Arc::ptr_eq(&view.snapshot, &before.snapshot));
    let running: u32 = view.operations.iter().map(|o| o.counts.running).sum();
    assert_eq!(running, 4);
    let n1 = view.nodes.get("n1").unwrap().to_view();
    assert_eq!(n1.allocation_count, 4);
    assert_eq!(n1.usage.get(fairsched_resources::ResourceKind::Cpu), 4.0);

    // A change of the pools takes a snapshot at once, whatever it costs.
    ask(&mut a, |reply| Command::CreatePool {
        tree: None,
        name: "team".into(),
        parent: None,
        config: serde_json::Map::new(),
        reply,
    })
    .unwrap();
    let view = published(&a);
    assert!(!Arc::ptr_eq(&view.snapshot, &before.snapshot));
    assert!(view.snapshot.operations.contains_key("second"));
    assert!(view.tree("default").unwrap().config["pools"]["team"].is_object());

    // Once its turn comes (a tenth of the actor's time), a heartbeat starts one, taken in
    // slices between requests; the views show the previous one until it is whole.
    expensive_snapshots(&mut a);
    let taken = published(&a).snapshot.clone();
    heartbeat(&mut a, Vec::new());
    assert!(Arc::ptr_eq(&published(&a).snapshot, &taken));
    assert!(a.slicing.is_none());
    a.snapshot_cost = Duration::from_millis(2);
    a.snapshot_taken_at = Instant::now() - Duration::from_millis(30);
    heartbeat(&mut a, Vec::new());
    assert!(a.slicing.is_some(), "a snapshot in slices started");
    assert!(Arc::ptr_eq(&published(&a).snapshot, &taken));
    let mut slices = 0;
    while a.slicing.is_some() {
        a.snapshot_slice();
        slices += 1;
    }
    assert_eq!(slices, 1, "two operations: one slice");
    a.settle();
    let view = published(&a);
    assert!(!Arc::ptr_eq(&view.snapshot, &taken));
    assert!(view.snapshot.operations.contains_key("second"));
    assert!(
        a.sliced.is_none(),
        "the slices' snapshot went into the view"
    );
}

/// In a small cluster no view takes a snapshot until a reader asks for one, however cheap:
/// a user's change and a heartbeat publish their records with the last snapshot, marked
/// `refresh_on_read`; a reader's `Command::Snapshot` then publishes one that has the change,
/// and asking again with nothing changed takes none.
#[test]
fn in_a_small_cluster_a_snapshot_is_taken_when_a_reader_asks() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = actor(dir.path(), 3_600_000);
    super::history_tests::register_n1(&mut a);
    submit(&mut a, "first");
    ask(&mut a, Command::Snapshot).unwrap();
    let before = published(&a);
    assert!(!before.refresh_on_read);
    assert!(before.snapshot.operations.contains_key("first"));

    // A cheap snapshot (a small cluster) is no longer taken with every view.
    a.snapshot_cost = Duration::ZERO;
    heartbeat(&mut a, Vec::new());
    submit(&mut a, "second");
    let view = published(&a);
    assert!(
        view.operations.contains_key("second"),
        "the records show it"
    );
    assert!(Arc::ptr_eq(&view.snapshot, &before.snapshot));
    assert!(view.refresh_on_read);

    // A reader asks: the snapshot has the change.
    ask(&mut a, Command::Snapshot).unwrap();
    let fresh = published(&a);
    assert!(!fresh.refresh_on_read);
    assert!(fresh.snapshot.operations.contains_key("second"));

    // Nothing changed since: asking again takes no new one.
    ask(&mut a, Command::Snapshot).unwrap();
    assert!(Arc::ptr_eq(&published(&a).snapshot, &fresh.snapshot));

    // A large cluster's views never ask readers to wait for one (the snapshot lags instead).
    expensive_snapshots(&mut a);
    submit(&mut a, "third");
    assert!(!published(&a).refresh_on_read);
}

/// After a slice, waiting requests go first for three times its time before the next slice
/// may (see `Actor::run`).
#[test]
fn a_slice_lets_requests_go_first_for_three_times_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = actor(dir.path(), 3_600_000);
    super::history_tests::register_n1(&mut a);
    for id in ["a", "b", "c"] {
        submit(&mut a, id);
    }
    assert!(a.slice_due(), "nothing sliced yet");
    a.slicing = Some((a.sched.begin_snapshot(0), Duration::ZERO));
    let before = Instant::now();
    a.slice();
    let took = before.elapsed();
    assert!(a.slicing.is_none(), "three operations: one slice");
    assert!(!a.slice_due(), "requests first");
    assert!(a.slices_rest_until <= Instant::now() + took * SLICE_REST);
    std::thread::sleep(took * SLICE_REST + Duration::from_millis(1));
    assert!(a.slice_due());
}
