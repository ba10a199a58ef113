//! `GET /metrics`: Prometheus metrics in the OpenMetrics text format (prometheus-client).
//!
//! Two kinds, kept apart as the rest of the server is:
//! * counters and histograms ([`ActorMetrics`]) are updated by the actor as things happen:
//!   placements, preemptions and interruptions (from the core's event log), heartbeat latency
//!   (around the core's `process_heartbeat`), fair-share update and store commit durations;
//! * gauges (pools, operations, nodes) are read from the published [`View`] at scrape time by a
//!   collector, so scraping never reaches the actor.

use crate::view::View;
use fairsched_api::{JobState, OperationState};
use fairsched_resources::{ResourceKind, ResourceVector};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The content type of `GET /metrics`.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type OneLabel = [(&'static str, &'static str); 1];

/// How jobs end, as `fairsched_jobs_finished_total` counts them.
const JOB_OUTCOMES: [JobState; 3] = [JobState::Completed, JobState::Failed, JobState::Aborted];

/// Starvation statuses of the core, in the order they are reported.
const STARVATION_STATUSES: [&str; 3] = ["non_starving", "starving", "aggressively_starving"];
/// Preemption reasons of the core (`PreemptionReason::name`); others are counted as they come.
const PREEMPTION_REASONS: [&str; 15] = [
    "preemption",
    "aggressive_preemption",
    "ssd_preemption",
    "ssd_aggressive_preemption",
    "graceful_preemption",
    "resource_overcommit",
    "resource_limits_violated",
    "node_disabled",
    "node_lost",
    "node_fair_share_tree_changed",
    "node_without_user_slots",
    "operation_aborted",
    "waiting_timeout",
    "gang_member_preempted",
    "gang_member_lost",
];

/// The metrics the actor updates. Cloning shares them.
#[derive(Clone, Debug)]
pub struct ActorMetrics {
    /// Allocations started, by heartbeat stage.
    pub placements: Family<OneLabel, Counter>,
    /// Allocations taken away (job aborted), by reason.
    pub preemptions: Family<OneLabel, Counter>,
    /// Jobs told to interrupt (graceful preemption, interruptible jobs), by reason.
    pub interruptions: Family<OneLabel, Counter>,
    /// Allocations started on resources held for others (backfill).
    pub backfills: Counter,
    /// Job reservations made.
    pub reservations: Counter,
    /// Gangs whose jobs were all held, ready to start together.
    pub gangs_assembled: Counter,
    /// Seconds in the core's `process_heartbeat`.
    pub heartbeat_duration: Histogram,
    /// Seconds of each fair-share update (the timer's `tick` when it updated).
    pub fair_share_update_duration: Histogram,
    /// Seconds of each store commit.
    pub store_commit_duration: Histogram,
    /// Seconds the actor spent in one step that heartbeats and requests wait behind, by step
    /// (`fair_share_prepare`, `fair_share_install`, `snapshot`).
    pub actor_pause_duration: Family<OneLabel, Histogram, fn() -> Histogram>,
    /// Jobs that ended, by outcome (`completed`, `failed`, `aborted`).
    pub jobs_finished: Family<OneLabel, Counter>,
    /// Operations that ended, by state (`completed`, `failed`, `aborted`).
    pub operations_finished: Family<OneLabel, Counter>,
    /// Seconds from an operation's submission to the start of each of its jobs.
    pub job_wait: Histogram,
}

impl Default for ActorMetrics {
    fn default() -> Self {
        let m = ActorMetrics {
            placements: Family::default(),
            preemptions: Family::default(),
            interruptions: Family::default(),
            backfills: Counter::default(),
            reservations: Counter::default(),
            gangs_assembled: Counter::default(),
            // 10 µs .. ~0.3 s.
            heartbeat_duration: Histogram::new(exponential_buckets(1e-5, 2.0, 16)),
            // 100 µs .. ~3 s.
            fair_share_update_duration: Histogram::new(exponential_buckets(1e-4, 2.0, 16)),
            store_commit_duration: Histogram::new(exponential_buckets(1e-5, 2.0, 18)),
            // 10 µs .. ~5 s.
            actor_pause_duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1e-5, 2.0, 20))
            }),
            jobs_finished: Family::default(),
            operations_finished: Family::default(),
            // 10 ms .. ~3 days.
            job_wait: Histogram::new(exponential_buckets(0.01, 2.0, 25)),
        };
        for outcome in JOB_OUTCOMES {
            m.jobs_finished
                .get_or_create(&[("outcome", outcome.name())])
                .inc_by(0);
        }
        for state in OperationState::ALL.iter().filter(|s| s.is_finished()) {
            m.operations_finished
                .get_or_create(&[("state", state.name())])
                .inc_by(0);
        }
        // Every known label value from the start: rate() works from the first scrape.
        for stage in fairsched_core::Stage::ALL {
            m.placements
                .get_or_create(&[("stage", stage.name())])
                .inc_by(0);
        }
        for reason in PREEMPTION_REASONS {
            m.preemptions.get_or_create(&[("reason", reason)]).inc_by(0);
            m.interruptions
                .get_or_create(&[("reason", reason)])
                .inc_by(0);
        }
        m
    }
}

impl ActorMetrics {
    pub fn placed(&self, stage: &'static str) {
        self.placements.get_or_create(&[("stage", stage)]).inc();
    }

    pub fn preempted(&self, reason: &'static str) {
        self.preemptions.get_or_create(&[("reason", reason)]).inc();
    }

    pub fn interrupted(&self, reason: &'static str) {
        self.interruptions
            .get_or_create(&[("reason", reason)])
            .inc();
    }

    /// A job ended with `outcome` (completed, failed, aborted; no other is counted).
    pub fn job_finished(&self, outcome: JobState) {
        if JOB_OUTCOMES.contains(&outcome) {
            self.jobs_finished
                .get_or_create(&[("outcome", outcome.name())])
                .inc();
        }
    }

    /// An operation ended in `state` (a finished one; no other is counted).
    pub fn operation_finished(&self, state: OperationState) {
        if state.is_finished() {
            self.operations_finished
                .get_or_create(&[("state", state.name())])
                .inc();
        }
    }
}

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Observes `d` in `h`.
pub fn observe(h: &Histogram, d: Duration) {
    h.observe(seconds(d));
}

impl ActorMetrics {
    /// The actor spent `d` in `step` (see [`ActorMetrics::actor_pause_duration`]).
    pub fn paused(&self, step: &'static str, d: Duration) {
        observe(
            &self.actor_pause_duration.get_or_create(&[("step", step)]),
            d,
        );
    }
}

/// The registry behind `GET /metrics`: the actor's metrics and the snapshot collector.
pub fn registry(actor: &ActorMetrics, view: watch::Receiver<Arc<View>>) -> Registry {
    let mut r = leader_registry(true);
    r.register(
        "fairsched_placements",
        "Allocations started (jobs placed on nodes), by heartbeat stage",
        actor.placements.clone(),
    );
    r.register(
        "fairsched_preemptions",
        "Allocations preempted (their jobs aborted), by reason",
        actor.preemptions.clone(),
    );
    r.register(
        "fairsched_interruptions",
        "Jobs told to interrupt before preemption, by reason",
        actor.interruptions.clone(),
    );
    r.register(
        "fairsched_backfills",
        "Allocations started on resources held for a job reservation or a gang, which their \
         time limit leaves in time",
        actor.backfills.clone(),
    );
    r.register(
        "fairsched_job_reservations",
        "Job reservations made (job_reservation)",
        actor.reservations.clone(),
    );
    r.register(
        "fairsched_gangs_assembled",
        "Gangs whose jobs were all held, to start together (gang_placement)",
        actor.gangs_assembled.clone(),
    );
    r.register_with_unit(
        "fairsched_heartbeat_duration",
        "Time the scheduling core spent processing one node heartbeat",
        Unit::Seconds,
        actor.heartbeat_duration.clone(),
    );
    r.register_with_unit(
        "fairsched_fair_share_update_duration",
        "Time of one fair-share update (vector HDRF and statuses)",
        Unit::Seconds,
        actor.fair_share_update_duration.clone(),
    );
    r.register_with_unit(
        "fairsched_store_commit_duration",
        "Time of one store commit (every accepted change is committed before the reply)",
        Unit::Seconds,
        actor.store_commit_duration.clone(),
    );
    r.register_with_unit(
        "fairsched_actor_pause_duration",
        "Time the scheduler's actor spent in one step that heartbeats and requests wait \
         behind, by step: preparing a fair-share update (fair_share_prepare), installing one \
         (fair_share_install), taking the published view's snapshot (snapshot)",
        Unit::Seconds,
        actor.actor_pause_duration.clone(),
    );
    r.register(
        "fairsched_jobs_finished",
        "Jobs that ended, by outcome",
        actor.jobs_finished.clone(),
    );
    r.register(
        "fairsched_operations_finished",
        "Operations that ended, by state",
        actor.operations_finished.clone(),
    );
    r.register_with_unit(
        "fairsched_job_wait",
        "Time from an operation's submission to the start of each of its jobs",
        Unit::Seconds,
        actor.job_wait.clone(),
    );
    r.register_collector(Box::new(ViewCollector { view }));
    r
}

/// Fills gauges from the published view at scrape time.
#[derive(Debug)]
struct ViewCollector {
    view: watch::Receiver<Arc<View>>,
}

/// One gauge family being written: its series, by label set.
struct Gauges<L> {
    name: &'static str,
    help: &'static str,
    series: Vec<(L, f64)>,
}

impl<L: EncodeLabelSet> Gauges<L> {
    fn new(name: &'static str, help: &'static str) -> Self {
        Gauges {
            name,
            help,
            series: Vec::new(),
        }
    }

    fn add(&mut self, labels: L, value: f64) {
        self.series.push((labels, value));
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut metric =
            encoder.encode_descriptor(self.name, self.help, None, MetricType::Gauge)?;
        for (labels, value) in &self.series {
            let gauge = ConstGauge::new(*value);
            gauge.encode(metric.encode_family(labels)?)?;
        }
        Ok(())
    }
}

type PoolLabels<'a> = [(&'static str, &'a str); 2];
type PoolResourceLabels<'a> = [(&'static str, &'a str); 3];

impl Collector for ViewCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let view = self.view.borrow().clone();
        let snap = &view.snapshot;
        let tree = snap.tree.as_str();
        let total = snap.total_resources;

        let mut fair = Gauges::<PoolLabels>::new(
            "fairsched_pool_fair_share_ratio",
            "Pool fair share on its dominant resource (share of the cluster).",
        );
        let mut usage = Gauges::<PoolLabels>::new(
            "fairsched_pool_usage_ratio",
            "Pool usage share on its dominant resource.",
        );
        let mut demand = Gauges::<PoolLabels>::new(
            "fairsched_pool_demand_ratio",
            "Pool demand share on its dominant resource.",
        );
        let mut op_count = Gauges::<PoolLabels>::new(
            "fairsched_pool_operations",
            "Operations in the pool's subtree (running and pending).",
        );
        let mut running_op_count = Gauges::<PoolLabels>::new(
            "fairsched_pool_running_operations",
            "Running operations in the pool's subtree.",
        );
        let mut starvation = Gauges::<PoolResourceLabels>::new(
            "fairsched_pool_starvation_status",
            "1 for the pool's current starvation status, 0 for the others.",
        );
        let mut r_fair = Gauges::<PoolResourceLabels>::new(
            "fairsched_pool_resource_fair_share_ratio",
            "Pool fair share per resource (share of the cluster's total).",
        );
        let mut r_usage = Gauges::<PoolResourceLabels>::new(
            "fairsched_pool_resource_usage_ratio",
            "Pool usage per resource (share of the cluster's total).",
        );
        let mut r_demand = Gauges::<PoolResourceLabels>::new(
            "fairsched_pool_resource_demand_ratio",
            "Pool demand per resource (share of the cluster's total).",
        );
        let mut r_guarantee = Gauges::<PoolResourceLabels>::new(
            "fairsched_pool_resource_strong_guarantee_ratio",
            "Pool effective strong guarantee per resource (share of the cluster's total).",
        );
        for (name, p) in &snap.pools {
            let e = &p.element;
            let labels = [("tree", tree), ("pool", name.as_str())];
            fair.add(labels, e.fair_share_ratio);
            usage.add(labels, e.usage_ratio);
            demand.add(labels, e.demand_ratio);
            op_count.add(labels, f64::from(p.operation_count));
            running_op_count.add(labels, f64::from(p.running_operation_count));
            for status in STARVATION_STATUSES {
                starvation.add(
                    [("tree", tree), ("pool", name), ("status", status)],
                    if e.starvation_status == status {
                        1.0
                    } else {
                        0.0
                    },
                );
            }
            let usage_share = ResourceVector::from_resources(&e.resource_usage, &total);
            let demand_share = ResourceVector::from_resources(&e.resource_demand, &total);
            let guarantee_share =
                ResourceVector::from_resources(&e.effective_strong_guarantee_resources, &total);
            // Resources the tree's nodes have none of (often gpu, network) would only add
            // series that are always 0.
            for kind in ResourceKind::ALL
                .into_iter()
                .filter(|k| total.get(*k) > 0.0)
            {
                let r = kind.name();
                let l = [("tree", tree), ("pool", name.as_str()), ("resource", r)];
                let f = e.detailed_fair_share.total.get(r).unwrap_or(0.0);
                r_fair.add(l, f);
                r_usage.add(l, usage_share.get(kind));
                r_demand.add(l, demand_share.get(kind));
                r_guarantee.add(l, guarantee_share.get(kind));
            }
        }
        fair.encode(&mut encoder)?;
        usage.encode(&mut encoder)?;
        demand.encode(&mut encoder)?;
        op_count.encode(&mut encoder)?;
        running_op_count.encode(&mut encoder)?;
        starvation.encode(&mut encoder)?;
        r_fair.encode(&mut encoder)?;
        r_usage.encode(&mut encoder)?;
        r_demand.encode(&mut encoder)?;
        r_guarantee.encode(&mut encoder)?;

        // Operations now, by state (the ones that ended are the counter
        // fairsched_operations_finished_total), and by starvation status.
        let mut by_state: BTreeMap<&str, f64> = ["pending", "running"]
            .into_iter()
            .map(|s| (s, 0.0))
            .collect();
        for op in view.operations.iter() {
            if let Some(n) = by_state.get_mut(op.view.state.name()) {
                *n += 1.0;
            }
        }
        let mut ops = Gauges::<[(&str, &str); 1]>::new(
            "fairsched_operations",
            "Operations not ended yet, by state (pending, running).",
        );
        for (state, n) in &by_state {
            ops.add([("state", state)], *n);
        }
        ops.encode(&mut encoder)?;
        let mut starving: BTreeMap<&str, f64> =
            STARVATION_STATUSES.into_iter().map(|s| (s, 0.0)).collect();
        for op in snap.operations.values() {
            if let Some(e) = &op.element {
                *starving.entry(e.starvation_status).or_default() += 1.0;
            }
        }
        let mut op_starvation = Gauges::<[(&str, &str); 2]>::new(
            "fairsched_operations_by_starvation_status",
            "Scheduled operations by starvation status.",
        );
        for (status, n) in &starving {
            op_starvation.add([("tree", tree), ("status", status)], *n);
        }
        op_starvation.encode(&mut encoder)?;
        let mut jobs = Gauges::<[(&str, &str); 1]>::new(
            "fairsched_jobs",
            "Jobs of unfinished operations, by state (pending: not yet placed).",
        );
        let (mut pending, mut running) = (0.0, 0.0);
        for op in view.operations.iter() {
            pending += f64::from(op.counts.pending);
            running += f64::from(op.counts.running);
        }
        jobs.add([("state", "pending")], pending);
        jobs.add([("state", "running")], running);
        let metric = encoder.encode_descriptor(
            "fairsched_store_read_only",
            "1 while the server is read-only because its store cannot write (it refuses \
             changes and heartbeats), else 0.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(if view.read_only.is_some() { 1 } else { 0 }).encode(metric)?;
        jobs.encode(&mut encoder)?;
        // Every tree has a 29000 series (0 when its guarantees fit), so that a rule on it
        // needs no absent(); other codes appear while active.
        let mut alerts = Gauges::<[(&str, String); 2]>::new(
            "fairsched_alerts",
            "Active scheduler alerts by tree and YTsaurus code (29000: the root's guarantees \
             exceed the tree's cluster and are scaled down): 1 while active.",
        );
        for t in &view.trees {
            let mut codes: BTreeMap<u32, f64> =
                BTreeMap::from([(fairsched_api::codes::GUARANTEES_OVERCOMMIT, 0.0)]);
            for a in &t.info.alerts {
                codes.insert(a.code, 1.0);
            }
            for (code, value) in codes {
                alerts.add(
                    [("tree", t.info.name.clone()), ("code", code.to_string())],
                    value,
                );
            }
        }
        alerts.encode(&mut encoder)?;

        // Nodes and the cluster.
        let mut nodes = Gauges::<[(&str, &str); 1]>::new(
            "fairsched_nodes",
            "Registered nodes, by whether they accept jobs.",
        );
        let lost = view
            .nodes
            .values()
            .filter(|n| n.view.state == Some(fairsched_api::NodeState::Lost))
            .count();
        let enabled = view
            .nodes
            .values()
            .filter(|n| {
                n.view.scheduler_jobs_enabled
                    && n.view.state != Some(fairsched_api::NodeState::Lost)
            })
            .count();
        nodes.add([("scheduler_jobs_enabled", "true")], enabled as f64);
        nodes.add(
            [("scheduler_jobs_enabled", "false")],
            (view.nodes.len() - enabled - lost) as f64,
        );
        nodes.encode(&mut encoder)?;
        let mut lost_nodes = Gauges::<[(&str, &str); 0]>::new(
            "fairsched_nodes_lost",
            "Nodes lost (no heartbeat within node_timeout_ms, or their agent stopped) since the \
             server started that have not registered again.",
        );
        lost_nodes.add([], lost as f64);
        lost_nodes.encode(&mut encoder)?;
        // One metric per resource, each in its own unit; `state` is total or used.
        let root_usage = snap
            .pools
            .values()
            .find(|p| p.parent.is_none())
            .map(|p| p.element.resource_usage)
            .unwrap_or(fairsched_resources::Resources::ZERO);
        for kind in ResourceKind::ALL {
            let (name, help) = match kind {
                ResourceKind::UserSlots => (
                    "fairsched_cluster_user_slots",
                    "User slots of the tree's nodes: total, and used by running jobs.",
                ),
                ResourceKind::Cpu => (
                    "fairsched_cluster_cpu_cores",
                    "CPU cores of the tree's nodes: total, and used by running jobs.",
                ),
                ResourceKind::Gpu => (
                    "fairsched_cluster_gpus",
                    "GPUs of the tree's nodes: total, and used by running jobs.",
                ),
                ResourceKind::Memory => (
                    "fairsched_cluster_memory_bytes",
                    "Memory of the tree's nodes in bytes: total, and used by running jobs.",
                ),
                ResourceKind::Network => (
                    "fairsched_cluster_network",
                    "Network units of the tree's nodes: total, and used by running jobs.",
                ),
            };
            let mut g = Gauges::<[(&str, &str); 2]>::new(name, help);
            g.add([("tree", tree), ("state", "total")], total.get(kind));
            g.add([("tree", tree), ("state", "used")], root_usage.get(kind));
            g.encode(&mut encoder)?;
        }
        let mut build = Gauges::<[(&str, &str); 1]>::new(
            "fairsched_build_info",
            "Always 1; the version of the running server in its label.",
        );
        build.add([("version", env!("CARGO_PKG_VERSION"))], 1.0);
        build.encode(&mut encoder)?;
        Ok(())
    }
}

/// A registry with the `fairsched_leader` gauge alone: 1 on the server that leads (with
/// SQLite, always), 0 on a standby (whose `/metrics` has only this).
pub fn leader_registry(leader: bool) -> Registry {
    let mut r = Registry::default();
    let gauge = prometheus_client::metrics::gauge::Gauge::<i64>::default();
    gauge.set(i64::from(leader));
    r.register(
        "fairsched_leader",
        "1 on the server that leads (schedules and accepts changes), 0 on a standby (servers \
         sharing a PostgreSQL store elect one leader)",
        gauge,
    );
    r
}
