//! The store conformance suite: the same behavioural cases ([`cases::CASES`]) against every
//! [`Store`] implementation. Each backend is one test that makes a fresh, empty place for a
//! store per case (a directory, a database) and runs every case there, so that a server started
//! once per backend serves all of its cases; a failing case is reported by name and the others
//! still run. PostgreSQL stores have cases of their own (`postgres_only`, `leader`).

mod cases;
mod leader;
mod postgres_only;

use fairsched_store::testkit::TempPostgres;
use fairsched_store::{PostgresStore, SqliteStore, Store, StoreError};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

/// A fresh place for one store: `open` opens (creating on first use) the store there, again
/// after the previous one was dropped for a restart.
pub(crate) struct Place {
    open: Box<dyn Fn() -> Result<Box<dyn Store>, StoreError>>,
}

impl Place {
    pub(crate) fn new(open: impl Fn() -> Result<Box<dyn Store>, StoreError> + 'static) -> Place {
        Place {
            open: Box::new(open),
        }
    }

    /// Opens the store (a failure fails the case).
    pub(crate) fn open(&self) -> Box<dyn Store> {
        (self.open)().unwrap_or_else(|e| panic!("cannot open the store: {e}"))
    }
}

/// A case of the suite: what it checks and how.
pub(crate) type Case = (&'static str, fn(&Place));

/// Runs `cases` one after the other, each through `case`; panics naming those that failed.
pub(crate) fn run<C>(backend: &str, cases: &[(&'static str, C)], mut case: impl FnMut(&C)) {
    let mut failed = Vec::new();
    for (name, c) in cases {
        let started = Instant::now();
        match catch_unwind(AssertUnwindSafe(|| case(c))) {
            Ok(()) => eprintln!(
                "{backend}: {name} ... ok ({} ms)",
                started.elapsed().as_millis()
            ),
            Err(_) => {
                eprintln!("{backend}: {name} ... FAILED");
                failed.push(*name);
            }
        }
    }
    assert!(failed.is_empty(), "{backend}: failed cases: {failed:?}");
}

#[test]
fn sqlite() {
    run("sqlite", cases::CASES, |case| {
        let dir = tempfile::tempdir().unwrap();
        case(&Place::new(move || {
            Ok(Box::new(SqliteStore::open(dir.path())?) as Box<dyn Store>)
        }))
    });
}

/// The same cases against a PostgreSQL server started for them, a database per case.
#[test]
fn postgres() {
    let server = TempPostgres::start().unwrap_or_else(|e| panic!("{e}"));
    run("postgres", cases::CASES, |case| {
        let url = server.url(&server.create_database().unwrap());
        case(&Place::new(move || {
            Ok(Box::new(PostgresStore::open(&url)?) as Box<dyn Store>)
        }))
    });
    // What only PostgreSQL stores do: their errors, reconnection, leader election.
    let cases = [postgres_only::CASES, leader::CASES].concat();
    run("postgres", &cases, |case| {
        let db = server.create_database().unwrap();
        case(&server, &db)
    });
}
