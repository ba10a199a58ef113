//! `fairsched up --demo`: a short workload on seed 001's project-root pool layout that shows
//! fair share and preemption on the cluster `up` just started.
//!
//! 1. The pools: `project-root` with a strong guarantee of the whole cluster's cpu, and below it
//!    `project-adhoc` (80 % of it), `project-batch` (no guarantee, weight 10) and
//!    `project-backup` (20 %), with seed 001's running-operation limits (10, 4, 2).
//! 2. A batch operation with twice as many jobs as the cluster holds: adhoc and backup are
//!    idle, so batch's fair share is the whole cluster and it fills it.
//! 3. An adhoc operation with jobs for 80 % of the cluster, rounded down to whole jobs: its
//!    guarantee (80 %) makes what they need its fair share; it waits below that share for its
//!    starvation timeout (3 s here), then starves and preempts batch jobs, which go back to
//!    pending.
//!
//! Everything goes through the public API, as a user's tools would.

use anyhow::{Context, anyhow};
use fairsched_api::client::ApiClient;
use fairsched_api::{
    CreatePool, EventQuery, OperationQuery, OperationView, SubmitOperation, TaskSubmit,
};
use fairsched_resources::{ResourceKind, Resources};
use serde_json::{Map, Value, json};
use std::time::{Duration, Instant};

/// Each demo job's cpu.
const JOB_CPU: f64 = 0.5;
/// How long `project-adhoc` waits below its fair share before it starves.
const ADHOC_STARVATION_TIMEOUT_MS: u64 = 3_000;
/// The user the demo's operations run as.
const DEMO_USER: &str = "demo";
const BATCH_JOB_SECONDS: u32 = 40;
const ADHOC_JOB_SECONDS: u32 = 15;

/// Runs the demo against the server at `client`, which has (or is about to have) `nodes`
/// nodes. Prints what happens; returns when the adhoc operation runs at its fair share.
pub async fn run(client: &ApiClient, nodes: usize) -> anyhow::Result<()> {
    let total_cpu = wait_for_nodes(client, nodes).await?;
    let slots = (total_cpu / JOB_CPU).floor() as u32;
    say(&format!(
        "the demo: seed 001's project-root layout on {nodes} nodes ({total_cpu} cpu, {slots} \
         jobs of {JOB_CPU} cpu at a time)"
    ));
    abort_earlier_demo(client).await?;
    create_pools(client, total_cpu).await?;
    say(
        "pools: project-root (guarantee: all cpu) > project-adhoc (80 %), project-batch \
         (weight 10, no guarantee), project-backup (20 %)",
    );

    let batch = submit(client, "project-batch", 2 * slots, BATCH_JOB_SECONDS).await?;
    say(&format!(
        "1/2 operation {batch} in project-batch: {} jobs of {BATCH_JOB_SECONDS} s. adhoc and \
         backup are idle, so batch's fair share is the whole cluster",
        2 * slots
    ));
    wait_until(client, &batch, Duration::from_secs(30), |op| {
        op.job_counts.running >= slots
    })
    .await?;
    print_shares(client).await?;

    let after = last_event_seq(client).await?;
    let adhoc_jobs = ((slots as f64) * 0.8).floor().max(1.0) as u32;
    let adhoc = submit(client, "project-adhoc", adhoc_jobs, ADHOC_JOB_SECONDS).await?;
    say(&format!(
        "2/2 operation {adhoc} in project-adhoc: {adhoc_jobs} jobs of {ADHOC_JOB_SECONDS} s \
         ({:.1} % of the cluster). Its guarantee (80 %) makes what they need its fair share, \
         which batch holds: after {} s below its fair share adhoc starves and preempts batch \
         jobs",
        100.0 * f64::from(adhoc_jobs) / f64::from(slots),
        ADHOC_STARVATION_TIMEOUT_MS / 1000
    ));
    let started = Instant::now();
    let mut seen = after;
    let mut preempted = 0;
    loop {
        let events = client
            .events(&EventQuery {
                after: Some(seen),
                ..EventQuery::default()
            })
            .await?;
        for e in &events {
            seen = seen.max(e.seq);
            if e.kind() == "allocation_preempted" {
                preempted += 1;
                let field = |k: &str| e.fields.get(k).and_then(Value::as_str).unwrap_or("?");
                say(&format!(
                    "preempted job {} of {} on {} (reason: {}) for {}",
                    field("job"),
                    field("operation"),
                    field("node"),
                    field("reason"),
                    e.fields
                        .get("preemptor")
                        .and_then(|p| p.get("operation"))
                        .and_then(Value::as_str)
                        .unwrap_or("?"),
                ));
            }
        }
        let op = client.get_operation(&adhoc).await?;
        if op.job_counts.running + op.job_counts.completed >= adhoc_jobs {
            break;
        }
        if started.elapsed() > Duration::from_secs(90) {
            return Err(anyhow!(
                "adhoc operation {adhoc} still has {} of {adhoc_jobs} jobs running after 90 s \
                 ({preempted} preemptions); see `fairsched op show {adhoc}`",
                op.job_counts.running
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    say(&format!(
        "adhoc runs all {adhoc_jobs} jobs after {:.1} s ({preempted} batch jobs preempted; they \
         run again when adhoc's jobs end)",
        started.elapsed().as_secs_f64()
    ));
    // The next fair-share update has seen adhoc's new usage (starvation status included).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    print_shares(client).await?;
    say("done; the cluster stays up (watch the page, or `fairsched events --follow`)");
    Ok(())
}

fn say(line: &str) {
    println!("[demo] {line}");
}

/// Waits (at most 30 s) until `nodes` nodes are registered; returns their total cpu.
async fn wait_for_nodes(client: &ApiClient, nodes: usize) -> anyhow::Result<f64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list = client.list_nodes().await?;
        if list.len() >= nodes {
            return Ok(list
                .iter()
                .map(|n| n.resources.get(ResourceKind::Cpu))
                .sum());
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "only {} of {nodes} nodes registered within 30 s",
                list.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A demo run again on the same data directory starts from an idle cluster: what an earlier
/// run left unfinished (its operations are the user `demo`'s) is aborted.
async fn abort_earlier_demo(client: &ApiClient) -> anyhow::Result<()> {
    let left = client
        .list_operations(&OperationQuery {
            state: Some("running,pending".into()),
            user: Some(DEMO_USER.into()),
            jobs: Some(false),
            ..OperationQuery::default()
        })
        .await?;
    for op in left {
        say(&format!("aborting {} left from an earlier demo", op.id));
        client.abort_operation(&op.id).await?;
    }
    Ok(())
}

/// Creates the layout; a pool that already exists (a second demo on the same data directory)
/// keeps its settings.
async fn create_pools(client: &ApiClient, total_cpu: f64) -> anyhow::Result<()> {
    let cpu = |fraction: f64| (total_cpu * fraction * 100.0).floor() / 100.0;
    let pools = [
        (
            "project-root",
            None,
            json!({"strong_guarantee_resources": {"cpu": cpu(1.0)},
                   "max_running_operation_count": 10, "max_operation_count": 50}),
        ),
        (
            "project-adhoc",
            Some("project-root"),
            json!({"strong_guarantee_resources": {"cpu": cpu(0.8)},
                   "max_running_operation_count": 10, "max_operation_count": 50,
                   "fair_share_starvation_timeout_ms": ADHOC_STARVATION_TIMEOUT_MS}),
        ),
        (
            "project-batch",
            Some("project-root"),
            json!({"weight": 10.0, "max_running_operation_count": 4, "max_operation_count": 50}),
        ),
        (
            "project-backup",
            Some("project-root"),
            json!({"strong_guarantee_resources": {"cpu": cpu(0.2)},
                   "max_running_operation_count": 2, "max_operation_count": 50}),
        ),
    ];
    let existing = client.list_pools(None).await?;
    for (name, parent, config) in pools {
        if existing.contains_key(name) {
            say(&format!("pool {name} exists; it keeps its settings"));
            continue;
        }
        let config: Map<String, Value> = match config {
            Value::Object(m) => m,
            _ => unreachable!("pool options are an object"),
        };
        client
            .create_pool(
                None,
                &CreatePool {
                    name: name.into(),
                    parent: parent.map(String::from),
                    config,
                },
            )
            .await
            .with_context(|| format!("creating pool {name}"))?;
    }
    Ok(())
}

async fn submit(client: &ApiClient, pool: &str, jobs: u32, seconds: u32) -> anyhow::Result<String> {
    let mut resources = Resources::ZERO;
    resources.set(ResourceKind::Cpu, JOB_CPU);
    resources.set(ResourceKind::UserSlots, 1.0);
    let reply = client
        .submit(&SubmitOperation {
            user: Some(DEMO_USER.into()),
            pool: Some(pool.into()),
            tasks: vec![TaskSubmit {
                job_count: jobs,
                resources,
                command: vec!["sleep".into(), seconds.to_string()],
                ..TaskSubmit::default()
            }],
            ..SubmitOperation::default()
        })
        .await?;
    Ok(reply.id)
}

async fn wait_until(
    client: &ApiClient,
    id: &str,
    limit: Duration,
    done: impl Fn(&OperationView) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        let op = client.get_operation(id).await?;
        if done(&op) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "operation {id} did not get there within {} s ({} running, {} pending); see \
                 `fairsched op show {id}`",
                limit.as_secs(),
                op.job_counts.running,
                op.job_counts.pending
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn last_event_seq(client: &ApiClient) -> anyhow::Result<u64> {
    let events = client
        .events(&EventQuery {
            limit: Some(1),
            ..EventQuery::default()
        })
        .await?;
    Ok(events.last().map(|e| e.seq).unwrap_or(0))
}

/// One line per demo pool: fair share, usage (dominant shares of the cluster) and starvation.
async fn print_shares(client: &ApiClient) -> anyhow::Result<()> {
    let tree = client.tree(None).await?;
    let pools = tree
        .pointer("/snapshot/pools")
        .and_then(Value::as_object)
        .ok_or_else(|| anyhow!("the tree reply has no snapshot.pools"))?;
    for name in ["project-adhoc", "project-batch", "project-backup"] {
        let Some(p) = pools.get(name) else { continue };
        let num = |k: &str| p.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        say(&format!(
            "  {name:<15} fair share {:>5.1} %  usage {:>5.1} %  {}",
            100.0 * num("fair_share_ratio"),
            100.0 * num("usage_ratio"),
            p.get("starvation_status")
                .and_then(Value::as_str)
                .unwrap_or("")
        ));
    }
    Ok(())
}
