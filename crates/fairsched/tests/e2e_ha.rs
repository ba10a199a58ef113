//! High availability on PostgreSQL, with real processes: a real PostgreSQL (`TempPostgres`),
//! two `fairsched server`s on one database, agents and a client given both URLs.
//!
//! Under continuous submission the leader is SIGKILLed several times: each time the standby
//! takes over (measured from the kill to the first acknowledged submission), and the killed
//! one, restarted, stands by. Then a partition: the leader is SIGSTOPped past its lease, the
//! standby takes over, and the old leader, resumed, exits without any of its writes landing.
//! At the end every acknowledged operation exists and completed, and no operation had two
//! jobs running at once (each job appends its start and end to a file).

mod common;

use common::{BIN, Proc, wait_for};
use fairsched_store::testkit::TempPostgres;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LEASE_MS: u64 = 1500;
/// The bar of issue 22: from the leader's death to the first acknowledged submission.
const FAILOVER_BAR: Duration = Duration::from_secs(10);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on `url` (`http://host:port`): the status and body; `None` when nothing answers
/// within a second.
fn http_get(url: &str, path: &str) -> Option<(u16, String)> {
    let addr = url.strip_prefix("http://")?;
    let mut stream =
        std::net::TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// A header of the response to `GET path` on `url`.
fn http_header(url: &str, path: &str, name: &str) -> Option<String> {
    let addr = url.strip_prefix("http://")?;
    let mut stream =
        std::net::TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let head = text.split_once("\r\n\r\n")?.0;
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// The server's role from `GET /api/v1/status` (`None`: it does not answer).
fn role(url: &str) -> Option<(String, Option<String>)> {
    let (status, body) = http_get(url, "/api/v1/status")?;
    if status != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    Some((
        v["role"].as_str()?.to_string(),
        v["leader"].as_str().map(str::to_string),
    ))
}

struct Ha {
    // Dropped in this order: the agents, the servers, PostgreSQL, the files.
    agents: Vec<Proc>,
    servers: [Option<Proc>; 2],
    pg: TempPostgres,
    db: String,
    urls: [String; 2],
    dir: tempfile::TempDir,
}

impl Ha {
    fn start() -> Ha {
        Ha::start_with(["", ""])
    }

    /// [`Ha::start`] with `extra` top-level options in each server's file.
    fn start_with(extra: [&str; 2]) -> Ha {
        let pg = TempPostgres::start().expect("a PostgreSQL server (Debian's postgresql)");
        let db = pg.create_database().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let urls = [free_port(), free_port()].map(|p| format!("http://127.0.0.1:{p}"));
        for (i, url) in urls.iter().enumerate() {
            std::fs::write(
                dir.path().join(format!("server{i}.toml")),
                format!(
                    "listen = {:?}\ndata_dir = {:?}\n{}\n[store]\nurl = {:?}\nlease_ms = {LEASE_MS}\n",
                    url.trim_start_matches("http://"),
                    dir.path().join(format!("data{i}")),
                    extra[i],
                    // Server 1 is given its store by `--store`, which wins over its file.
                    if i == 0 {
                        pg.url(&db)
                    } else {
                        "postgres://nobody@127.0.0.1:1/nothing".into()
                    },
                ),
            )
            .unwrap();
        }
        let mut ha = Ha {
            agents: Vec::new(),
            servers: [None, None],
            pg,
            db,
            urls,
            dir,
        };
        ha.start_server(0);
        wait_for("server 0 to lead", Duration::from_secs(30), || {
            ha.role(0) == "leader"
        });
        ha.start_server(1);
        wait_for(
            "server 1 to stand by, naming server 0",
            Duration::from_secs(30),
            || role(&ha.urls[1]) == Some(("standby".into(), Some(ha.urls[0].clone()))),
        );
        // The standby refuses the API naming the leader; the gauges say who leads.
        let (status, body) = http_get(&ha.urls[1], "/api/v1/operations").unwrap();
        assert_eq!(status, 503, "{body}");
        let error: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["code"], 100421, "{body}");
        assert_eq!(error["attributes"]["leader"], ha.urls[0].as_str(), "{body}");
        // A browser at the standby's page is sent to the leader's.
        let (status, _) = http_get(&ha.urls[1], "/").unwrap();
        assert_eq!(status, 307);
        let location = http_header(&ha.urls[1], "/", "location");
        assert_eq!(location, Some(format!("{}/", ha.urls[0])));
        for (i, leads) in [(0, 1), (1, 0)] {
            let (_, metrics) = http_get(&ha.urls[i], "/metrics").unwrap();
            assert!(
                metrics.contains(&format!("\nfairsched_leader {leads}\n")),
                "server {i}: {metrics}"
            );
        }
        ha
    }

    fn servers(&self) -> String {
        self.urls.join(",")
    }

    fn log(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    fn start_server(&mut self, i: usize) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(&format!("server{i}")))
            .unwrap();
        let mut child = Command::new(BIN)
            .arg("server")
            .arg("--config")
            .arg(self.dir.path().join(format!("server{i}.toml")))
            .args(if i == 1 {
                vec!["--store".to_string(), self.pg.url(&self.db)]
            } else {
                Vec::new()
            })
            .env("FAIRSCHED_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start fairsched server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains(&self.urls[i]), "{line}");
        self.servers[i] = Some(Proc(child));
    }

    fn role(&self, i: usize) -> String {
        role(&self.urls[i]).map(|r| r.0).unwrap_or_default()
    }

    fn start_agent(&mut self, node: &str) {
        let log = std::fs::File::create(self.log(node)).unwrap();
        let agent = Command::new(BIN)
            .args(["agent", "--server", &self.servers(), "--node-id", node])
            .args(["--resources", "cpu=4,memory=4GiB,user_slots=8"])
            .args(["--kill-grace-ms", "1000", "--work-dir"])
            .arg(self.dir.path().join(node))
            .env("FAIRSCHED_LOG", "fairsched_agent=info")
            .env("FAIRSCHED_MEMORY_ENFORCEMENT", "poll")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start fairsched agent");
        self.agents.push(Proc(agent));
    }

    /// The leader as the database has it: its epoch and which server.
    fn leader(&self) -> (i64, usize) {
        let mut client = self.pg.client(&self.db).unwrap();
        let row = client
            .query_one("SELECT epoch, holder FROM leader", &[])
            .unwrap();
        let holder: String = row.get(1);
        let at = self
            .urls
            .iter()
            .position(|u| *u == holder)
            .unwrap_or_else(|| panic!("the leader {holder:?} is none of the servers"));
        (row.get(0), at)
    }

    /// Every stored operation's state.
    fn operations(&self) -> BTreeMap<String, String> {
        let mut client = self.pg.client(&self.db).unwrap();
        client
            .query("SELECT id, state FROM operations", &[])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }
}

/// Submits one operation (one job of 300 ms that appends its start and end to `runs`)
/// through a client given both servers; whether it was acknowledged.
fn submit(servers: &str, id: &str, runs: &Path, timeout: Duration) -> bool {
    submit_job(servers, id, runs, "sleep 0.3", timeout)
}

/// [`submit`] with a job that runs `body` between its start and its end.
fn submit_job(servers: &str, id: &str, runs: &Path, body: &str, timeout: Duration) -> bool {
    let script = format!(
        "echo \"$FAIRSCHED_OPERATION_ID $FAIRSCHED_JOB_ID start $(date +%s%N)\" >> {runs:?}; \
         trap 'echo \"$FAIRSCHED_OPERATION_ID $FAIRSCHED_JOB_ID end $(date +%s%N)\" >> {runs:?}; \
         exit 143' TERM; {body}; \
         echo \"$FAIRSCHED_OPERATION_ID $FAIRSCHED_JOB_ID end $(date +%s%N)\" >> {runs:?}",
    );
    let (ok, out, _) = common::run_with_env(
        &["op", "run", "--id", id, "--", "sh", "-c", &script],
        &[("FAIRSCHED_SERVER", servers)],
        timeout,
    );
    ok && out.trim() == id
}

/// What the submitting thread saw: each acknowledged operation with when it was sent and
/// when it was acknowledged.
#[derive(Default)]
struct Submitted {
    acknowledged: Vec<(String, Instant, Instant)>,
    attempts: usize,
}

/// Submits operations one after another until `stop`.
fn submitter(
    servers: String,
    runs: PathBuf,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Submitted>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let id = format!("{prefix}{n}");
            let sent = Instant::now();
            let ok = submit(&servers, &id, &runs, Duration::from_secs(40));
            let mut seen = seen.lock().unwrap();
            seen.attempts += 1;
            if ok {
                seen.acknowledged.push((id, sent, Instant::now()));
            } else {
                drop(seen);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    })
}

/// Each operation's runs from the jobs' file: (job, start, end) in nanoseconds.
fn runs(path: &Path) -> BTreeMap<String, Vec<(String, u128, Option<u128>)>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out: BTreeMap<String, Vec<(String, u128, Option<u128>)>> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [op, job, what, at] = f[..] else {
            panic!("a bad line in the jobs' file: {line:?}");
        };
        let at: u128 = at.parse().unwrap();
        let list = out.entry(op.to_string()).or_default();
        match what {
            "start" => list.push((job.to_string(), at, None)),
            "end" => {
                let run = list
                    .iter_mut()
                    .rev()
                    .find(|r| r.0 == job && r.2.is_none())
                    .unwrap_or_else(|| panic!("an end without a start: {line:?}"));
                run.2 = Some(at);
            }
            _ => panic!("{line:?}"),
        }
    }
    out
}

/// SIGKILLs the leader `times` times under continuous submission; then the partition.
fn failovers(times: usize) {
    let mut ha = Ha::start();
    ha.start_agent("n1");
    ha.start_agent("n2");
    let jobs = ha.dir.path().join("runs.txt");
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Submitted::default()));
    let thread = submitter(ha.servers(), jobs.clone(), "op", stop.clone(), seen.clone());
    let acknowledged = |seen: &Mutex<Submitted>| seen.lock().unwrap().acknowledged.len();
    wait_for("submissions to go through", Duration::from_secs(30), || {
        acknowledged(&seen) >= 5
    });

    // A job that runs through every failover, until the test lets it end: adopted by each
    // new leader, it runs once.
    let release = ha.dir.path().join("release-long");
    assert!(submit_job(
        &ha.servers(),
        "long",
        &jobs,
        &format!("while [ ! -e {release:?} ]; do sleep 0.1; done"),
        Duration::from_secs(40),
    ));
    wait_for("the long job to start", Duration::from_secs(30), || {
        runs(&jobs).contains_key("long")
    });

    let mut measured = Vec::new();
    for round in 0..times {
        let (epoch, leader) = ha.leader();
        assert_eq!(ha.role(leader), "leader");
        assert_eq!(
            role(&ha.urls[1 - leader]),
            Some(("standby".into(), Some(ha.urls[leader].clone()))),
            "the standby names the leader"
        );
        let before = acknowledged(&seen);
        let killed = Instant::now();
        let server = ha.servers[leader].take().unwrap();
        server.signal(nix::sys::signal::Signal::SIGKILL);
        assert!(!server.wait(Duration::from_secs(10)));
        // The first submission sent after the kill that is acknowledged.
        let first = || {
            seen.lock().unwrap().acknowledged[before..]
                .iter()
                .find(|(_, sent, _)| *sent > killed)
                .map(|(_, _, acknowledged)| *acknowledged)
        };
        wait_for("a submission after the failover", FAILOVER_BAR * 3, || {
            first().is_some()
        });
        let first = first().unwrap();
        let took = first - killed;
        eprintln!("failover {}: {} ms", round + 1, took.as_millis());
        measured.push(took);
        let (new_epoch, new_leader) = ha.leader();
        assert_eq!((new_epoch, new_leader), (epoch + 1, 1 - leader));
        // The killed server comes back as a standby.
        ha.start_server(leader);
        wait_for(
            "the restarted server to stand by, naming the new leader",
            Duration::from_secs(30),
            || {
                role(&ha.urls[leader])
                    == Some(("standby".into(), Some(ha.urls[1 - leader].clone())))
            },
        );
        let now = acknowledged(&seen);
        wait_for(
            "submissions to the new leader",
            Duration::from_secs(30),
            || acknowledged(&seen) >= now + 3,
        );
    }
    for (i, took) in measured.iter().enumerate() {
        assert!(*took < FAILOVER_BAR, "failover {} took {took:?}", i + 1);
    }
    // The long job still runs (once), and ends when told.
    let long = runs(&jobs)["long"].clone();
    assert_eq!(long.len(), 1, "the long job ran once: {long:?}");
    assert_eq!(long[0].2, None, "the long job still runs: {long:?}");
    std::fs::write(&release, "").unwrap();
    wait_for(
        "the long operation to complete",
        Duration::from_secs(30),
        || {
            ha.operations()
                .get("long")
                .is_some_and(|s| s == "completed")
        },
    );
    assert_eq!(runs(&jobs)["long"].len(), 1);

    // The partition: the leader is paused past its lease; the standby takes over.
    let (epoch, leader) = ha.leader();
    let paused = ha.servers[leader].take().unwrap();
    paused.signal(nix::sys::signal::Signal::SIGSTOP);
    let stopped = Instant::now();
    // A change sent to the paused leader alone waits in its socket.
    let late = {
        let url = ha.urls[leader].clone();
        let runs = jobs.clone();
        std::thread::spawn(move || submit(&url, "late", &runs, Duration::from_secs(40)))
    };
    wait_for("the standby to take over", Duration::from_secs(20), || {
        ha.leader() == (epoch + 1, 1 - leader)
    });
    eprintln!(
        "partition: the standby took over {} ms after the pause",
        stopped.elapsed().as_millis()
    );
    std::thread::sleep(Duration::from_millis(500));
    paused.signal(nix::sys::signal::Signal::SIGCONT);
    let mut paused = paused;
    let status = paused.exit_status(
        stopped,
        Duration::from_secs(30),
        "the deposed leader did not exit",
    );
    drop(paused);
    assert_eq!(
        status.code(),
        Some(fairsched_server::LOST_LEADERSHIP_EXIT_CODE),
        "the deposed leader exits with the lost-leadership status"
    );
    let log = std::fs::read_to_string(ha.log(&format!("server{leader}"))).unwrap();
    assert!(log.contains("lost the leadership"), "{log}");
    assert!(
        !late.join().unwrap(),
        "the deposed leader acknowledged a change"
    );
    assert!(
        !ha.operations().contains_key("late"),
        "the deposed leader's change was written"
    );
    {
        let mut c = ha.pg.client(&ha.db).unwrap();
        let late_events: i64 = c
            .query_one(
                "SELECT COUNT(*) FROM events WHERE operation = 'late' OR record LIKE '%\"late\"%'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(late_events, 0, "events of the deposed leader's change");
    }
    ha.start_server(leader);
    wait_for(
        "the resumed server, restarted, to stand by",
        Duration::from_secs(30),
        || ha.role(leader) == "standby",
    );
    let now = acknowledged(&seen);
    wait_for(
        "submissions after the partition",
        Duration::from_secs(30),
        || acknowledged(&seen) >= now + 3,
    );
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();

    // Every acknowledged operation exists and completes; no job ran twice at once.
    let acknowledged: Vec<String> = seen
        .lock()
        .unwrap()
        .acknowledged
        .iter()
        .map(|(id, _, _)| id.clone())
        .collect();
    let attempts = seen.lock().unwrap().attempts;
    wait_for(
        "every acknowledged operation to complete",
        Duration::from_secs(60),
        || {
            let stored = ha.operations();
            acknowledged
                .iter()
                .all(|id| stored.get(id).is_some_and(|s| s == "completed"))
        },
    );
    let stored = ha.operations();
    let failed: Vec<_> = stored.iter().filter(|(_, s)| *s != "completed").collect();
    assert!(
        failed.is_empty(),
        "operations that did not complete: {failed:?}"
    );
    let runs = runs(&jobs);
    for id in &acknowledged {
        assert!(runs.contains_key(id), "{id} never ran");
    }
    for (op, list) in &runs {
        let mut list = list.clone();
        list.sort_by_key(|r| r.1);
        for pair in list.windows(2) {
            let end = pair[0].2.unwrap_or_else(|| {
                panic!(
                    "{op}: job {} started again while running: {list:?}",
                    pair[0].0
                )
            });
            assert!(end <= pair[1].1, "{op}: two jobs ran at once: {list:?}");
        }
        assert!(
            list.iter().all(|r| r.2.is_some()),
            "{op}: a run that never ended: {list:?}"
        );
    }
    eprintln!(
        "{} failovers (ms: {:?}), {} acknowledged operations of {attempts} attempts, {} ran \
         more than once",
        measured.len(),
        measured.iter().map(|d| d.as_millis()).collect::<Vec<_>>(),
        acknowledged.len(),
        runs.values().filter(|l| l.len() > 1).count()
    );
    for agent in std::mem::take(&mut ha.agents) {
        agent.signal(nix::sys::signal::Signal::SIGTERM);
        assert!(
            agent.wait(Duration::from_secs(20)),
            "an agent stops cleanly"
        );
    }
    // The leader, stopped, releases its lease: the standby takes over at once.
    let (epoch, leader) = ha.leader();
    let server = ha.servers[leader].take().unwrap();
    server.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        server.wait(Duration::from_secs(20)),
        "the leader stops cleanly"
    );
    let released = Instant::now();
    wait_for(
        "the standby to take the released lease",
        Duration::from_secs(10),
        || ha.leader() == (epoch + 1, 1 - leader),
    );
    assert!(
        released.elapsed() < Duration::from_millis(LEASE_MS),
        "a released lease is taken before it would have run out ({:?})",
        released.elapsed()
    );
    let standby = ha.servers[1 - leader].take().unwrap();
    standby.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        standby.wait(Duration::from_secs(20)),
        "the new leader stops cleanly"
    );
}

/// A standby whose agent token differs from the leader's (it would refuse every agent once
/// elected) says so at ERROR; servers with the same credentials say nothing of it.
#[test]
fn a_standby_with_other_credentials_says_so() {
    const DIFFER: &str = "differ from those of the leader";
    let ha = Ha::start_with([
        "agent_token = \"the-agents-token-of-server-zero\"",
        "agent_token = \"the-agents-token-of-server-one\"",
    ]);
    wait_for(
        "the standby to say its credentials differ",
        Duration::from_secs(30),
        || {
            std::fs::read_to_string(ha.log("server1"))
                .is_ok_and(|l| l.contains(DIFFER) && l.contains("ERROR"))
        },
    );
    drop(ha);
    let same = Ha::start_with([
        "agent_token = \"the-same-agents-token-of-both\"",
        "agent_token = \"the-same-agents-token-of-both\"",
    ]);
    // Several of the standby's election attempts (a fifth of the lease each).
    std::thread::sleep(Duration::from_millis(3 * LEASE_MS));
    let log = std::fs::read_to_string(same.log("server1")).unwrap();
    assert!(!log.contains(DIFFER), "{log}");
}

/// Three failovers and a partition (the CI test).
#[test]
fn the_standby_takes_over_and_nothing_acknowledged_is_lost() {
    failovers(3);
}

/// Issue 22's bar: ten failovers.
#[test]
#[ignore = "about 40 s; run with --ignored"]
fn ten_failovers() {
    failovers(10);
}

/// A leader cut off from its database (here PostgreSQL is shut down under it) cannot renew
/// its lease: it stops serving and exits with the lost-leadership status within the lease,
/// before a standby could be elected.
#[test]
fn a_leader_cut_off_from_the_database_exits_within_its_lease() {
    let mut ha = Ha::start();
    let (_, leader) = ha.leader();
    // An immediate shutdown: PostgreSQL ends every session at once.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(ha.pg.pid() as i32),
        nix::sys::signal::Signal::SIGQUIT,
    )
    .unwrap();
    let cut = Instant::now();
    let mut server = ha.servers[leader].take().unwrap();
    let status = server.exit_status(
        cut,
        Duration::from_secs(10),
        "the leader went on without its database",
    );
    let took = cut.elapsed();
    eprintln!(
        "the leader exited {} ms after the database went",
        took.as_millis()
    );
    assert_eq!(
        status.code(),
        Some(fairsched_server::LOST_LEADERSHIP_EXIT_CODE)
    );
    assert!(
        took < Duration::from_millis(LEASE_MS),
        "it exited after its lease ran out ({took:?})"
    );
    let log = std::fs::read_to_string(ha.log(&format!("server{leader}"))).unwrap();
    assert!(
        log.contains("lost the leadership") && log.contains("was not renewed"),
        "{log}"
    );
    drop(server);
    // The standby stays up, standing by, while there is no database to be elected in.
    assert_eq!(ha.role(1 - leader), "standby");
}
