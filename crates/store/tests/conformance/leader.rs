//! Leader election and fencing in a PostgreSQL store: one lease at a time, epochs that only
//! grow, and a deposed leader's writes refused by the database.

use super::postgres_only::PgCase;
use fairsched_store::testkit::TempPostgres;
use fairsched_store::{
    Batch, PostgresStore, Store, StoreError, StoreRead, StoredEvent, StoredOperation,
};
use std::time::{Duration, Instant};

pub(crate) const CASES: &[PgCase] = &[
    (
        "one lease at a time: renewed, released, taken over with a higher epoch",
        one_lease_at_a_time,
    ),
    (
        "a deposed leader's commit is refused and writes nothing",
        a_deposed_leader_writes_nothing,
    ),
    (
        "a leader committing while another is elected: nothing lands after the election",
        commits_racing_an_election,
    ),
    ("simultaneous elections have one winner", one_winner),
    (
        "a second connection of an elected store renews its lease and is fenced alike",
        connect_again,
    ),
    (
        "a leader frozen in the middle of a write holds off an election only a moment",
        a_frozen_leader_holds_off_no_election,
    ),
];

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(200);

fn event(seq: u64) -> Batch {
    Batch {
        events: vec![StoredEvent {
            seq,
            unix_ms: seq,
            kind: "x".into(),
            record: "{}".into(),
            ..StoredEvent::default()
        }],
        ..Batch::default()
    }
}

/// Tries to become the leader until the lease held now expires (by the database's clock).
fn take_over(store: &mut PostgresStore, holder: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(epoch) = store.acquire_leadership(holder, LONG).unwrap() {
            return epoch;
        }
        assert!(Instant::now() < deadline, "the lease did not expire");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn not_leader(e: &StoreError, epoch: u64, current: u64) -> bool {
    matches!(e, StoreError::NotLeader { epoch: a, current: b } if (*a, *b) == (epoch, current))
}

/// A write holds the leader row until its transaction ends, which holds off an election; a
/// leader that froze in the middle of one (SIGSTOP, a stopped machine) must not hold it off
/// for as long as its connection lives: PostgreSQL ends its idle transaction, the standby is
/// elected, and the frozen write never lands.
fn a_frozen_leader_holds_off_no_election(server: &TempPostgres, db: &str) {
    let mut a = PostgresStore::open(&server.url(db)).unwrap();
    let mut b = PostgresStore::open(&server.url(db)).unwrap();
    assert_eq!(a.acquire_leadership("server-a", SHORT).unwrap(), Some(1));
    let frozen = std::thread::spawn(move || a.freeze_in_a_write(Duration::from_secs(6)));
    // The lease runs out while the write waits in its transaction.
    std::thread::sleep(SHORT * 2);
    let start = Instant::now();
    assert_eq!(take_over(&mut b, "server-b"), 2);
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "the election waited {took:?}"
    );
    let ended = frozen.join().unwrap();
    assert!(ended.is_err(), "the frozen write went through: {ended:?}");
    b.commit(&event(1)).unwrap();
}

fn one_lease_at_a_time(server: &TempPostgres, db: &str) {
    let mut a = PostgresStore::open(&server.url(db)).unwrap();
    let mut b = PostgresStore::open(&server.url(db)).unwrap();
    assert_eq!(a.leader().unwrap().epoch, 0);
    assert_eq!(a.epoch(), None);
    // Not elected: there is nothing to renew.
    assert!(a.renew_leadership(LONG).is_err());
    assert_eq!(a.acquire_leadership("server-a", LONG).unwrap(), Some(1));
    assert_eq!(a.epoch(), Some(1));
    // Another server, and this one again, wait while the lease runs.
    assert_eq!(b.acquire_leadership("server-b", LONG).unwrap(), None);
    assert_eq!(a.acquire_leadership("server-a", LONG).unwrap(), None);
    let leader = b.leader().unwrap();
    assert_eq!((leader.epoch, leader.holder.as_str()), (1, "server-a"));
    assert!(
        leader.expires_in_ms > 50_000 && leader.expires_in_ms <= 60_000,
        "{leader:?}"
    );
    // A renewal from a short lease to a long one keeps the others out.
    a.renew_leadership(SHORT).unwrap();
    assert!(b.leader().unwrap().expires_in_ms <= 200);
    a.renew_leadership(LONG).unwrap();
    std::thread::sleep(SHORT * 2);
    assert_eq!(b.acquire_leadership("server-b", LONG).unwrap(), None);
    a.commit(&event(1)).unwrap();
    // Released: the next server is elected at once, with a higher epoch.
    a.release_leadership().unwrap();
    assert_eq!(b.acquire_leadership("server-b", LONG).unwrap(), Some(2));
    assert_eq!(b.leader().unwrap().holder, "server-b");
    let e = a.renew_leadership(LONG).unwrap_err();
    assert!(not_leader(&e, 1, 2), "{e:?}");
    let e = a.check_writable().unwrap_err();
    assert!(not_leader(&e, 1, 2), "{e:?}");
    let e = a.prune(u64::MAX, 10, 10).unwrap_err();
    assert!(not_leader(&e, 1, 2), "{e:?}");
    b.commit(&event(2)).unwrap();
    b.check_writable().unwrap();
    // Reads go on for a deposed leader (a standby answers them).
    assert_eq!(a.load().unwrap().last_event_seq, 2);
}

fn a_deposed_leader_writes_nothing(server: &TempPostgres, db: &str) {
    let mut first = PostgresStore::open(&server.url(db)).unwrap();
    let mut second = PostgresStore::open(&server.url(db)).unwrap();
    assert_eq!(first.acquire_leadership("first", SHORT).unwrap(), Some(1));
    first.commit(&event(1)).unwrap();
    // The first one's lease expires (it stopped renewing: paused, cut off); the second one
    // is elected.
    assert_eq!(take_over(&mut second, "second"), 2);
    let late = Batch {
        operations: vec![StoredOperation {
            id: "late".into(),
            state: "running".into(),
            record: "{}".into(),
            ..StoredOperation::default()
        }],
        ..event(2)
    };
    let e = first.commit(&late).unwrap_err();
    assert!(not_leader(&e, 1, 2), "{e:?}");
    let message = e.to_string();
    assert!(
        message.contains("no longer the leader") && message.contains("nothing was written"),
        "{message}"
    );
    let loaded = second.load().unwrap();
    assert!(loaded.operations.is_empty());
    assert_eq!(loaded.last_event_seq, 1);
    assert_eq!(second.operation_state("late").unwrap(), None);
    // The new leader writes.
    second.commit(&late).unwrap();
    assert_eq!(second.load().unwrap().last_event_seq, 2);
}

/// The first leader commits an event after another as fast as it can while its lease expires
/// and another server is elected. Every commit it was told succeeded is in the store when the
/// new leader loads it, and none lands after that.
fn commits_racing_an_election(server: &TempPostgres, db: &str) {
    let mut first = PostgresStore::open(&server.url(db)).unwrap();
    let mut second = PostgresStore::open(&server.url(db)).unwrap();
    assert_eq!(first.acquire_leadership("first", SHORT).unwrap(), Some(1));
    let (last_acknowledged, seen_at_election) = std::thread::scope(|scope| {
        let writer = scope.spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut acknowledged = 0;
            for seq in 1.. {
                match first.commit(&event(seq)) {
                    Ok(()) => acknowledged = seq,
                    Err(e) => {
                        assert!(not_leader(&e, 1, 2), "{e:?}");
                        break;
                    }
                }
                assert!(Instant::now() < deadline, "never deposed");
            }
            acknowledged
        });
        assert_eq!(take_over(&mut second, "second"), 2);
        let seen = second.load().unwrap().last_event_seq;
        (writer.join().unwrap(), seen)
    });
    assert!(last_acknowledged > 0);
    assert_eq!(seen_at_election, last_acknowledged);
    assert_eq!(second.load().unwrap().last_event_seq, last_acknowledged);
}

fn one_winner(server: &TempPostgres, db: &str) {
    let url = server.url(db);
    let mut stores: Vec<PostgresStore> =
        (0..6).map(|_| PostgresStore::open(&url).unwrap()).collect();
    let won: Vec<Option<u64>> = std::thread::scope(|scope| {
        let tries: Vec<_> = stores
            .iter_mut()
            .enumerate()
            .map(|(i, s)| scope.spawn(move || s.acquire_leadership(&format!("s{i}"), LONG)))
            .collect();
        tries
            .into_iter()
            .map(|t| t.join().unwrap().unwrap())
            .collect()
    });
    let winners: Vec<usize> = (0..won.len()).filter(|&i| won[i].is_some()).collect();
    assert_eq!(winners.len(), 1, "{won:?}");
    assert_eq!(won[winners[0]], Some(1));
    assert_eq!(
        stores[0].leader().unwrap().holder,
        format!("s{}", winners[0])
    );
}

fn connect_again(server: &TempPostgres, db: &str) {
    let mut a = PostgresStore::open(&server.url(db)).unwrap();
    let mut b = PostgresStore::open(&server.url(db)).unwrap();
    assert_eq!(
        PostgresStore::check_url("postgres://u@h:1/d").map_err(|e| e.to_string()),
        Ok(())
    );
    assert!(PostgresStore::check_url("postgres://u@h:notaport/d").is_err());
    assert_eq!(a.acquire_leadership("a", SHORT).unwrap(), Some(1));
    let mut lease = a.connect_again().unwrap();
    assert_eq!(lease.epoch(), Some(1));
    // Renewed through the second connection, the lease keeps the other server out.
    for _ in 0..4 {
        lease.renew_leadership(SHORT).unwrap();
        std::thread::sleep(SHORT / 2);
        assert_eq!(b.acquire_leadership("b", LONG).unwrap(), None);
    }
    a.commit(&event(1)).unwrap();
    // No longer renewed: the other server is elected, and both connections are refused.
    assert_eq!(take_over(&mut b, "b"), 2);
    let e = lease.renew_leadership(SHORT).unwrap_err();
    assert!(not_leader(&e, 1, 2), "{e:?}");
    let e = lease.commit(&event(2)).unwrap_err();
    assert!(not_leader(&e, 1, 2), "{e:?}");
    let e = a.commit(&event(2)).unwrap_err();
    assert!(not_leader(&e, 1, 2), "{e:?}");
    assert_eq!(b.load().unwrap().last_event_seq, 1);
}
