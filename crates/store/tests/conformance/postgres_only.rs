//! What only a PostgreSQL store does: its schema version, its errors, a lost connection,
//! calls from an async runtime, concurrent first opens. Each case gets the server and a new
//! database of its own.

use fairsched_store::testkit::TempPostgres;
use fairsched_store::{
    Batch, PostgresStore, SqliteStore, Store, StoreError, StoredEvent, StoredOperation,
};

pub(crate) type PgCase = (&'static str, fn(&TempPostgres, &str));

pub(crate) const CASES: &[PgCase] = &[
    (
        "the schema has the SQLite store's version; a newer one is refused",
        schema_version,
    ),
    ("errors name what is wrong, never the password", errors),
    ("a lost connection is opened again", reconnects),
    (
        "it works when called from inside an async runtime",
        inside_a_runtime,
    ),
    (
        "servers opening a new database at once create its schema once",
        concurrent_first_opens,
    ),
];

fn op(id: &str) -> StoredOperation {
    StoredOperation {
        id: id.into(),
        state: "running".into(),
        record: "{}".into(),
        ..StoredOperation::default()
    }
}

fn ops(ids: &[&str]) -> Batch {
    Batch {
        operations: ids.iter().map(|id| op(id)).collect(),
        ..Batch::default()
    }
}

fn schema_version(server: &TempPostgres, db: &str) {
    assert_eq!(
        PostgresStore::schema_version(),
        SqliteStore::schema_version()
    );
    drop(PostgresStore::open(&server.url(db)).unwrap());
    server
        .execute(db, "INSERT INTO schema_version (version) VALUES (99)")
        .unwrap();
    let e = PostgresStore::open(&server.url(db)).unwrap_err();
    assert!(matches!(e, StoreError::TooNew { found: 99, .. }), "{e}");
}

/// Opens `url` and returns the error's message, checking that it is `expected`.
fn open_error(url: &str, expected: fn(&StoreError) -> bool) -> String {
    let e = PostgresStore::open(url).unwrap_err();
    assert!(expected(&e), "{url}: {e:?}");
    e.to_string()
}

fn errors(server: &TempPostgres, db: &str) {
    let port = server.port();
    let bad_url = |e: &StoreError| matches!(e, StoreError::BadUrl { .. });
    for url in [
        "http://127.0.0.1/db",
        "postgres://u:s3cret@127.0.0.1:notaport/db",
    ] {
        let m = open_error(url, bad_url);
        assert!(
            m.contains("not a PostgreSQL URL") && !m.contains("s3cret"),
            "{m}"
        );
    }
    let connect = |e: &StoreError| matches!(e, StoreError::Connect { .. });
    // Nothing listens on a port just freed.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let m = open_error(&format!("postgres://u:s3cret@127.0.0.1:{free}/db"), connect);
    assert!(
        m.contains(&format!("postgres://u@127.0.0.1:{free}/db"))
            && m.contains("refused")
            && !m.contains("s3cret"),
        "{m}"
    );
    server
        .execute(db, "CREATE ROLE alice LOGIN PASSWORD 'right'")
        .unwrap();
    let m = open_error(
        &format!("postgres://alice:wrong@127.0.0.1:{port}/{db}"),
        connect,
    );
    assert!(
        m.contains("authentication failed") && m.contains("alice") && !m.contains("wrong"),
        "{m}"
    );
    let m = open_error(&server.url("nosuchdb"), connect);
    assert!(m.contains("\"nosuchdb\" does not exist"), "{m}");
    // The right password opens it (the role may create the schema in its database).
    server
        .execute(db, &format!("ALTER DATABASE {db} OWNER TO alice"))
        .unwrap();
    server
        .execute(db, "GRANT ALL ON SCHEMA public TO alice")
        .unwrap();
    let mut s =
        PostgresStore::open(&format!("postgres://alice:right@127.0.0.1:{port}/{db}")).unwrap();
    s.commit(&ops(&["a"])).unwrap();
    // A failing request names what failed.
    server.execute(db, "DROP TABLE events").unwrap();
    let e = s
        .commit(&Batch {
            events: vec![StoredEvent {
                seq: 1,
                ..StoredEvent::default()
            }],
            ..Batch::default()
        })
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::Postgres(m) if m.contains("\"events\" does not exist")),
        "{e:?}"
    );
}

fn reconnects(server: &TempPostgres, db: &str) {
    let mut s = PostgresStore::open(&server.url(db)).unwrap();
    let reader = s.reader().unwrap();
    s.commit(&ops(&["a"])).unwrap();
    // The server ends every session of the database (as a restart or a failover would).
    let end_sessions = || {
        server
            .execute(
                "postgres",
                &format!(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                     WHERE datname = '{db}' AND pid <> pg_backend_pid()"
                ),
            )
            .unwrap()
    };
    end_sessions();
    // The request that finds the connection lost may fail; the next one connects again.
    if let Err(e) = s.commit(&ops(&["b"])) {
        assert!(matches!(e, StoreError::Postgres(_)), "{e:?}");
        s.check_writable().unwrap();
        s.commit(&ops(&["b"])).unwrap();
    }
    // Reads are repeated on a new connection: they succeed at once.
    end_sessions();
    assert_eq!(
        reader.operation_state("b").unwrap().as_deref(),
        Some("running")
    );
    assert_eq!(s.load().unwrap().operations.len(), 2);
}

fn inside_a_runtime(server: &TempPostgres, db: &str) {
    let url = server.url(db);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let loaded = runtime.block_on(async move {
        let mut s = PostgresStore::open(&url).unwrap();
        s.commit(&ops(&["a", "b"])).unwrap();
        let reader = s.reader().unwrap();
        assert_eq!(
            reader.operation_state("a").unwrap().as_deref(),
            Some("running")
        );
        s.load().unwrap()
    });
    assert_eq!(loaded.operations.len(), 2);
}

fn concurrent_first_opens(server: &TempPostgres, db: &str) {
    let url = server.url(db);
    let mut incarnations: Vec<u64> = std::thread::scope(|scope| {
        let opens: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| PostgresStore::open(&url).map(|s| s.load().unwrap())))
            .collect();
        opens
            .into_iter()
            .map(|t| t.join().unwrap().unwrap().incarnation)
            .collect()
    });
    incarnations.sort();
    assert_eq!(incarnations, [0, 1, 2, 3]);
    let mut client = server.client(db).unwrap();
    let versions: i64 = client
        .query_one("SELECT COUNT(*) FROM schema_version", &[])
        .unwrap()
        .get(0);
    assert_eq!(versions, 1);
}
