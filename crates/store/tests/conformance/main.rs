//! The store conformance suite: the same behavioural cases ([`cases::CASES`]) against every
//! [`Store`] implementation. Each backend is one test that makes a fresh, empty place for a
//! store per case (a directory, a database) and runs every case there, so that a server started
//! once per backend serves all of its cases; a failing case is reported by name and the others
//! still run.

mod cases;

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

/// Runs `cases`, each in a place of its own from `fresh`; panics naming those that failed.
pub(crate) fn run(backend: &str, cases: &[Case], fresh: &mut dyn FnMut(&str) -> Place) {
    let mut failed = Vec::new();
    for (name, case) in cases {
        let started = Instant::now();
        let place = fresh(name);
        let outcome = catch_unwind(AssertUnwindSafe(|| case(&place)));
        drop(place);
        match outcome {
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
    run("sqlite", cases::CASES, &mut |_| {
        let dir = tempfile::tempdir().unwrap();
        Place::new(move || Ok(Box::new(SqliteStore::open(dir.path())?) as Box<dyn Store>))
    });
}

/// The same cases against a PostgreSQL server started for them, a database per case.
#[test]
fn postgres() {
    let server = TempPostgres::start().unwrap_or_else(|e| panic!("{e}"));
    run("postgres", cases::CASES, &mut |_| {
        let url = server.url(&server.create_database().unwrap());
        Place::new(move || Ok(Box::new(PostgresStore::open(&url)?) as Box<dyn Store>))
    });
}
