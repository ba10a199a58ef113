//! Trace replay (`fairsched simulate`): the jobs of a workload trace submitted to the
//! scheduling core in virtual time, on simulated nodes, under a [`Policy`].
//!
//! The nodes, the jobs running on them and the carrying out of the core's orders are the
//! shared simulated cluster's ([`crate::cluster`], as for scenarios); the replay adds the
//! trace's arrivals, the policy's pool tree, when nodes heartbeat, and its outputs.
//!
//! **Model.** Every trace job is one operation of the core, submitted at its trace submission
//! time, in the pool its policy names. A job needs `width` units at once (SWF processors; one
//! pod); units are packed into allocations of at most one node's worth (the largest node),
//! so a 96-processor job on 32-processor nodes is three allocations of 32 cpu. Malleable jobs'
//! allocations start independently as room appears (rigid ones: all at once, a gang) and each
//! runs the job's trace run time from its own start; the job has started at its first
//! allocation's start and finishes when the core reports the operation completed (its last
//! allocation finished). A preempted allocation loses its work and runs again from the start
//! (the replay's operations set no interruption signal, so the core aborts what it preempts);
//! a rigid job is preempted whole or not at all (the core's gang rule). Each allocation also
//! takes one user slot.
//!
//! **Time.** The loop visits only the instants at which something happens: a submission, an
//! allocation's end, the next fair-share update when operations submitted since the last
//! one wait for it (the core schedules an operation only after an update included it, as
//! YTsaurus does), or the update at which something waiting starves
//! ([`Scheduler::next_status_change`]). At each instant: submissions, then the core's tick (a
//! fair-share update at most every `fair_share_update_period_ms` of virtual time, skipped
//! while no allocation is pending, since fair shares then decide nothing, and between new
//! submissions and starvation run only every [`QUIET_REFRESH_PERIODS`] periods, and never
//! under the batch baselines, which decide nothing by fair shares), then
//! heartbeats of the nodes whose
//! allocations ended (reporting them; one that holds nothing and whose room is within that of
//! an earlier reporting node of its group that changed nothing, with nothing started since,
//! is skipped: its heartbeat would change nothing either, which debug builds check), then,
//! while jobs are pending, of the nodes with room,
//! in node order, skipping a node whose room is within that of a node of its group that
//! started nothing at this instant (a node gangs hold jobs on: of one the same gangs hold
//! the same jobs on, whose heartbeat changed nothing, with nothing started since; debug builds
//! check it). Nodes that are full and have nothing to report do not heartbeat, except after
//! an update that wants preemption ([`Scheduler::preemption_wanted`]): then the nodes running
//! something that may be preempted heartbeat too, as a real cluster's periodic heartbeats
//! would let them ([`Replay::preemption_round`]). Deterministic: the same trace, nodes and
//! options give the same result.

pub mod compare;
pub mod output;
pub mod plots;
pub mod policy;
pub mod usage;

use crate::cluster::{Cluster, JobModel, JobRef};
use crate::trace::{MachineGroup, Trace};
use fairsched_core::{
    EventKind, FinishedAllocation, Millis, NodeId, NodeSpec, OperationId, OperationSpec,
    OperationState, Scheduler, SchedulerConfig, check_duration,
};
use fairsched_resources::{ResourceKind, Resources};
pub use policy::{Policy, PolicyTree};
use std::collections::{BTreeMap, BTreeSet};

/// What a replay is asked to do besides the trace.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    pub policy: Policy,
    /// The nodes; `None`: the machine the trace describes.
    pub nodes: Option<Vec<MachineGroup>>,
    /// Virtual milliseconds between fair-share updates.
    pub fair_share_update_period_ms: u64,
    /// Replay only the first this many jobs of the trace (in submission order).
    pub limit: Option<usize>,
    /// Jobs start whole (all their allocations at once, through the core's gang placement;
    /// the default) instead of allocation by allocation as nodes free up (malleable). The
    /// baselines are rigid whatever this says.
    pub rigid: bool,
    /// With rigid jobs, the gathering gang holds what it needs until it starts, as EASY's
    /// queue head (see [`PolicyTree::new`]); not for the baselines, which always do.
    pub reservation: bool,
    /// Starving pools and operations preempt (the default); without, nothing starves (see
    /// [`PolicyTree::new`]). The baselines never preempt either way.
    pub preemption: bool,
}

impl ReplayOptions {
    /// The policy's name in outputs: `+reservation` after it with [`Self::reservation`],
    /// then `+nopreemption` without [`Self::preemption`].
    pub fn policy_name(&self) -> String {
        let mut name = self.policy.name();
        if self.reservation {
            name.push_str("+reservation");
        }
        if !self.preemption {
            name.push_str("+nopreemption");
        }
        name
    }
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            policy: Policy::FairShare,
            nodes: None,
            fair_share_update_period_ms: DEFAULT_FAIR_SHARE_UPDATE_PERIOD_MS,
            limit: None,
            rigid: true,
            reservation: false,
            preemption: true,
        }
    }
}

/// Default virtual time between fair-share updates: 10 s. Traces span months; YTsaurus'
/// production period (1 s or less) would only add updates between which little changes.
pub const DEFAULT_FAIR_SHARE_UPDATE_PERIOD_MS: u64 = 10_000;

/// How far a replay has come, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgressUpdate {
    /// Jobs submitted so far.
    pub submitted: u64,
    /// Jobs that have finished (completed or failed) so far.
    pub finished: u64,
    /// Jobs to replay in all.
    pub total: u64,
    /// Virtual time, ms.
    pub t_ms: Millis,
}

/// What became of a trace job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobState {
    /// Ran to the end.
    Completed,
    /// Still waiting (or running) when nothing could change any more: no submission left, no
    /// allocation running, and a fair-share update and a heartbeat of every node started none.
    Unfinished,
    /// The scheduler failed or refused it (message).
    Failed(String),
    /// Not submitted: it cannot run on these nodes (reason).
    Skipped(String),
}

impl JobState {
    /// The state's name in `jobs.csv`.
    pub fn name(&self) -> &'static str {
        match self {
            JobState::Completed => "completed",
            JobState::Unfinished => "unfinished",
            JobState::Failed(_) => "failed",
            JobState::Skipped(_) => "skipped",
        }
    }
}

/// The replay's record of one trace job (in the order of `Trace::jobs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRecord {
    /// Index into the trace's jobs.
    pub job: usize,
    /// Pool the job ran in (`None`: its user's ephemeral pool).
    pub pool: Option<String>,
    /// Allocations the job needs at once.
    pub allocations: u32,
    pub first_start_ms: Option<Millis>,
    pub finish_ms: Option<Millis>,
    /// Allocations preempted (each ran again).
    pub preemptions: u32,
    pub state: JobState,
}

impl JobRecord {
    /// Time from submission to the first allocation's start.
    pub fn wait_ms(&self, submit_ms: Millis) -> Option<Millis> {
        self.first_start_ms.map(|s| s.saturating_sub(submit_ms))
    }
}

/// One point of the time series (taken at most [`SAMPLES`] times over the replay).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub t_ms: Millis,
    /// Fraction of the cluster's cpu (gpu for a cluster with GPUs) held by allocations.
    pub utilization: f64,
    pub running_allocations: u64,
    pub pending_allocations: u64,
    /// Jobs submitted and not finished.
    pub jobs_in_system: u64,
}

/// Number of time-series samples aimed at over the trace's span.
pub const SAMPLES: u64 = 2000;

/// Counters of a replay.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReplayStats {
    pub placements: u64,
    pub preemptions: u64,
    pub heartbeats: u64,
    pub fair_share_updates: u64,
    /// Instants the loop visited.
    pub instants: u64,
    /// Group pools created and removed ([`PolicyTree::group_pool`]).
    pub group_pools_created: u64,
    pub group_pools_removed: u64,
}

/// Whether room `free` of a node of `group` is within the room of a node of its group in
/// `fruitless` (nodes whose heartbeat changed nothing: room, group).
fn within_fruitless(fruitless: &[(Resources, usize)], group: usize, free: &Resources) -> bool {
    (fruitless.iter()).any(|(f, g)| *g == group && f.dominates(free))
}

/// The jobs gangs hold on a node: per gang (its operation), jobs held per task.
type GangHolds = Vec<(OperationId, BTreeMap<usize, u32>)>;

/// Everything a replay produced.
#[derive(Clone, Debug)]
pub struct ReplayReport {
    pub policy: String,
    /// `malleable` (allocations start as nodes free up) or `rigid` (jobs start whole).
    pub job_model: &'static str,
    pub nodes: Vec<MachineGroup>,
    pub total_resources: Resources,
    pub records: Vec<JobRecord>,
    pub series: Vec<Sample>,
    /// The measured resource's usage over virtual time, exactly, in bins (the plots' and
    /// the utilization's source).
    pub usage: usage::UsageBins,
    /// The resource utilization measures: gpu on a cluster with GPUs, else cpu.
    pub measured: ResourceKind,
    pub stats: ReplayStats,
    /// Virtual time of the last instant.
    pub end_ms: Millis,
    pub fair_share_update_period_ms: Millis,
}

/// What a replay tells its caller as it goes.
pub trait Observer {
    /// Now and then (every thousand jobs submitted or finished, and at the end): how far
    /// the replay has come.
    fn progress(&mut self, update: ProgressUpdate);
    /// Job `record.job`'s outcome is final: it completed, failed or was skipped, or (when the
    /// replay ends) it is unfinished. Called once per job, in the order outcomes become
    /// known; an error stops the replay with it.
    fn outcome(&mut self, record: &JobRecord) -> Result<(), String>;
}

/// An [`Observer`] that only shows progress.
struct ProgressOnly<'a>(&'a mut dyn FnMut(ProgressUpdate));

impl Observer for ProgressOnly<'_> {
    fn progress(&mut self, update: ProgressUpdate) {
        (self.0)(update);
    }

    fn outcome(&mut self, _record: &JobRecord) -> Result<(), String> {
        Ok(())
    }
}

/// Replays `trace` under `options`; `progress` is called now and then.
pub fn replay(
    trace: &Trace,
    options: &ReplayOptions,
    progress: &mut dyn FnMut(ProgressUpdate),
) -> Result<ReplayReport, String> {
    replay_observed(trace, options, &mut ProgressOnly(progress))
}

/// Replays `trace` under `options`, telling `observer` of the progress and of every job's
/// outcome as it becomes known.
pub fn replay_observed(
    trace: &Trace,
    options: &ReplayOptions,
    observer: &mut dyn Observer,
) -> Result<ReplayReport, String> {
    let nodes = match (&options.nodes, &trace.machine) {
        (Some(nodes), _) | (None, Some(nodes)) => nodes.clone(),
        (None, None) => {
            return Err(
                "the trace does not describe its machine; give the nodes with --nodes".to_string(),
            );
        }
    };
    if nodes.iter().all(|g| g.count == 0) {
        return Err("there are no nodes".to_string());
    }
    let count = options
        .limit
        .unwrap_or(trace.jobs.len())
        .min(trace.jobs.len());
    let groups: Vec<String> = trace.jobs[..count]
        .iter()
        .map(|j| policy::pool_name(&j.group))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if options.reservation && options.policy.is_baseline() {
        return Err(format!(
            "{} already reserves for its queue head: reservation is for fairsched's own policies",
            options.policy.name()
        ));
    }
    let tree = PolicyTree::new(
        &options.policy,
        &groups,
        options.rigid,
        options.reservation,
        options.preemption,
    )?;
    let config = SchedulerConfig {
        fair_share_update_period_ms: update_period(options),
        // A trace's jobs may wait for days; none is failed as hung.
        operation_hangup_check_period_ms: HANGUP_NEVER,
        operation_hangup_safe_timeout_ms: HANGUP_NEVER,
        operation_hangup_due_to_limiting_ancestor_safe_timeout_ms: HANGUP_NEVER,
        ..SchedulerConfig::default()
    };
    let core = Scheduler::new(config, tree.trees.clone()).map_err(|e| e.to_string())?;
    let mut sim = Replay::new(trace, count, &nodes, core, tree, options)?;
    sim.run(observer)?;
    Ok(sim.report(options))
}

/// Virtual milliseconds between fair-share updates: the option's, but 1 ms under the
/// baselines (`fcfs`, `easy`, `conservative`), which decide at every event as a batch system does (their
/// queue head plans at the update that admits a job).
fn update_period(options: &ReplayOptions) -> Millis {
    if options.policy.is_baseline() {
        1
    } else {
        options.fair_share_update_period_ms.max(1)
    }
}

/// While jobs wait and no new operation needs admitting, fair shares are refreshed every this
/// many update periods (1 min with the default period): often enough for starvation (30 s
/// timeouts by default) to be noticed within a minute, rarely enough that a trace whose cluster
/// is saturated for months does not update at every job end.
pub const QUIET_REFRESH_PERIODS: u64 = 6;

/// Visits of one instant after which the loop gives up with an error instead of hanging: an
/// instant is visited again only for allocations that end where they start (run time 0) and
/// the update they wait for, a handful of times in practice.
const MAX_VISITS_PER_INSTANT: u64 = 1_000_000;

/// Far enough in the future never to come, and small enough that adding periods to a trace's
/// times does not overflow.
const HANGUP_NEVER: u64 = 1 << 50;

struct Replay<'t> {
    trace: &'t Trace,
    count: usize,
    /// The core and the simulated nodes `n0`, `n1`, ... (node number = index).
    cluster: Cluster,
    tree: PolicyTree,
    /// Machine group of each node (nodes of a group have the same resources and tags).
    node_group: Vec<usize>,
    total: Resources,
    /// The resource utilization is measured on: gpu when the cluster has GPUs, else cpu.
    measured: ResourceKind,
    /// Largest node: jobs are cut into allocations of at most this.
    largest: Resources,
    records: Vec<JobRecord>,
    /// Jobs whose outcome became final since the observer was last told.
    outcomes: Vec<usize>,
    /// Pending allocations per job.
    pending: Vec<u32>,
    by_operation: BTreeMap<OperationId, usize>,
    /// Unfinished jobs per group pool the replay created and has not removed
    /// ([`PolicyTree::group_pool`]).
    group_jobs: BTreeMap<String, u64>,
    pending_allocations: u64,
    jobs_in_system: u64,
    finished_jobs: u64,
    submitted_jobs: u64,
    waiting_for_update: bool,
    last_update_ms: Option<Millis>,
    period: Millis,
    /// Whether fair shares are refreshed while nothing new waits (not under the baselines).
    quiet_refresh: bool,
    series: Vec<Sample>,
    usage: usage::UsageBins,
    sample_every: Millis,
    next_sample: Millis,
    stats: ReplayStats,
    end_ms: Millis,
    node_groups: Vec<MachineGroup>,
    /// [`ReplayOptions::rigid`].
    rigid: bool,
    /// Allocations that ended (reported by their nodes).
    finished_allocations: u64,
    /// The state after the last preemption round if it changed nothing (see
    /// [`Replay::preemption_round`]).
    fruitless_round: Option<RoundState>,
}

/// See [`Replay::round_state`].
#[derive(Clone, Debug, PartialEq, Eq)]
struct RoundState {
    counts: [u64; 4],
    targets: Vec<(usize, OperationId)>,
}

impl<'t> Replay<'t> {
    fn new(
        trace: &'t Trace,
        count: usize,
        groups: &[MachineGroup],
        core: Scheduler,
        tree: PolicyTree,
        options: &ReplayOptions,
    ) -> Result<Replay<'t>, String> {
        let tree_rigid = tree.jobs.always_rigid;
        let mut cluster = Cluster::new(core);
        let mut node_group = Vec::new();
        let mut total = Resources::ZERO;
        let mut largest = Resources::ZERO;
        for (group_index, group) in groups.iter().enumerate() {
            for _ in 0..group.count {
                let id = NodeId(format!("n{}", node_group.len()));
                let spec = NodeSpec {
                    id: id.clone(),
                    resources: group.resources,
                    tags: group.tags.iter().cloned().collect(),
                };
                cluster
                    .add_node(0, spec)
                    .map_err(|e| format!("node {}: {e}", id.0))?;
                node_group.push(group_index);
                total = total.add(&group.resources);
                if group.resources.raw_of(ResourceKind::Cpu) > largest.raw_of(ResourceKind::Cpu)
                    || (group.resources.raw_of(ResourceKind::Cpu)
                        == largest.raw_of(ResourceKind::Cpu)
                        && group.resources.dominates(&largest))
                {
                    largest = group.resources;
                }
            }
        }
        // The nodes heartbeat when jobs end on them and while they have room (see the
        // module documentation).
        cluster.track_room();
        let measured = if total.raw_of(ResourceKind::Gpu) > 0 {
            ResourceKind::Gpu
        } else {
            ResourceKind::Cpu
        };
        let span = trace.jobs[..count].last().map_or(0, |j| j.submit_ms);
        let sample_every = (span / SAMPLES).max(1);
        // Bins planned for the submissions' span plus the longest job.
        let longest = trace.jobs[..count]
            .iter()
            .map(|j| j.duration_ms)
            .max()
            .unwrap_or(0);
        let records = (0..count)
            .map(|job| JobRecord {
                job,
                pool: None,
                allocations: 0,
                first_start_ms: None,
                finish_ms: None,
                preemptions: 0,
                state: JobState::Unfinished,
            })
            .collect();
        Ok(Replay {
            trace,
            count,
            cluster,
            tree,
            node_group,
            total,
            measured,
            largest,
            records,
            outcomes: Vec::new(),
            pending: vec![0; count],
            by_operation: BTreeMap::new(),
            group_jobs: BTreeMap::new(),
            pending_allocations: 0,
            jobs_in_system: 0,
            finished_jobs: 0,
            submitted_jobs: 0,
            waiting_for_update: false,
            last_update_ms: None,
            period: update_period(options),
            quiet_refresh: !options.policy.is_baseline(),
            series: Vec::new(),
            usage: usage::UsageBins::for_span(span.saturating_add(longest)),
            sample_every,
            next_sample: 0,
            stats: ReplayStats::default(),
            end_ms: 0,
            node_groups: groups.to_vec(),
            rigid: options.rigid || tree_rigid,
            finished_allocations: 0,
            fruitless_round: None,
        })
    }

    fn run(&mut self, observer: &mut dyn Observer) -> Result<(), String> {
        let mut next_job = 0;
        let mut last_progress = 0;
        let mut same_instant = 0u64;
        loop {
            let next_submit = (next_job < self.count).then(|| self.trace.jobs[next_job].submit_ms);
            let next_end = self.cluster.next_end();
            let next_update = (self.waiting_for_update && self.cluster.any_room()).then(|| {
                self.last_update_ms
                    .map_or(0, |l| l + self.period)
                    .max(self.end_ms)
            });
            let next_status = self.next_status_update();
            let Some(t) = [next_submit, next_end, next_update, next_status]
                .into_iter()
                .flatten()
                .min()
            else {
                if self.pending_allocations > 0 && self.stalled_round()? {
                    continue;
                }
                break;
            };
            if t < self.end_ms {
                return Err(format!(
                    "the replay went back in time from {} ms to {t} ms (a bug; please report it)",
                    self.end_ms
                ));
            }
            if t == self.end_ms && self.stats.instants > 0 {
                same_instant += 1;
                if same_instant > MAX_VISITS_PER_INSTANT {
                    return Err(format!(
                        "the replay visited {t} ms {same_instant} times without moving on (a \
                         bug; please report it)"
                    ));
                }
            } else {
                same_instant = 0;
            }
            self.stats.instants += 1;
            // What the jobs held since the last instant, held until now.
            let used = self.cluster.used().raw_of(self.measured) as f64;
            self.usage.add(self.end_ms, t, used);
            self.end_ms = t;
            while next_job < self.count && self.trace.jobs[next_job].submit_ms == t {
                self.submit(t, next_job)?;
                next_job += 1;
            }
            // The jobs that end now leave their nodes, which report them all before any node
            // schedules (as a batch system learns of every job that ended at an instant before
            // it schedules), then heartbeat.
            let reports = self.cluster.end_jobs_due(t);
            let reporting: Vec<usize> = reports.keys().copied().collect();
            self.finished_allocations += reports.values().map(|f| f.len() as u64).sum::<u64>();
            for (n, finished) in reports {
                self.cluster
                    .report_finished(t, n, finished)
                    .map_err(|e| format!("node {n} reporting ended jobs: {e}"))?;
            }
            self.absorb_events(t)?;
            self.tick(t)?;
            let mut visited = BTreeSet::new();
            let mut placements = self.stats.placements;
            self.heartbeat_reporting_nodes(t, reporting, &mut visited)?;
            // A gang that has gathered all it needs starts now on the nodes holding it; once
            // it has, what it held back may start others (and the gang after it plans), and a
            // node visited before a start may now be offered to other jobs (a holder needs
            // less of it): the nodes with room heartbeat again until a round starts nothing.
            // After an update that wants preemption, the nodes not visited yet heartbeat too.
            let mut preemption_round = self.last_update_ms == Some(t);
            loop {
                self.heartbeat_nodes_with_room(t, &mut visited)?;
                self.start_gathered_gang(t)?;
                if std::mem::take(&mut preemption_round) {
                    self.preemption_round(t, &mut visited)?;
                }
                if self.stats.placements == placements || self.pending_allocations == 0 {
                    break;
                }
                placements = self.stats.placements;
                visited.clear();
            }
            self.sample(t);
            self.tell_outcomes(observer)?;
            if self.submitted_jobs + self.finished_jobs >= last_progress + 1000 {
                last_progress = self.submitted_jobs + self.finished_jobs;
                observer.progress(self.progress(t));
            }
        }
        self.tell_outcomes(observer)?;
        for record in &self.records {
            if record.state == JobState::Unfinished {
                observer.outcome(record)?;
            }
        }
        observer.progress(self.progress(self.end_ms));
        Ok(())
    }

    /// Tells `observer` the outcomes that became final since it was last told.
    fn tell_outcomes(&mut self, observer: &mut dyn Observer) -> Result<(), String> {
        for j in self.outcomes.drain(..) {
            observer.outcome(&self.records[j])?;
        }
        Ok(())
    }

    /// Heartbeats the nodes whose jobs ended at this instant, in order, each `visited`. A node
    /// is skipped (but counts as visited) when nothing holds resources on it and its room (and
    /// tags) is within the room of a reporting node that started nothing, made no gang progress
    /// and held nothing, with nothing started since: this one would start nothing either
    /// (debug builds check it on a copy of the core). Most reporting nodes of a busy cluster
    /// are such: skipping them took 44 % of the heartbeats of Curie's first 5,000 jobs.
    fn heartbeat_reporting_nodes(
        &mut self,
        t: Millis,
        reporting: Vec<usize>,
        visited: &mut BTreeSet<usize>,
    ) -> Result<(), String> {
        let mut fruitless: Vec<(Resources, usize)> = Vec::new();
        for n in reporting {
            visited.insert(n);
            let Some(node) = self.cluster.node(n) else {
                continue;
            };
            let (free, group) = (node.free(), self.node_group[n]);
            if within_fruitless(&fruitless, group, &free) && !self.holds_on(n) {
                #[cfg(debug_assertions)]
                self.check_fruitless(t, n);
                continue;
            }
            if self.heartbeat_changes(t, n)? {
                fruitless.clear();
            } else if !self.holds_on(n) {
                fruitless.push((free, group));
            }
        }
        Ok(())
    }

    /// Heartbeats node `n` (reporting nothing); whether that started something or moved the
    /// gang gathering in the tree.
    fn heartbeat_changes(&mut self, t: Millis, n: usize) -> Result<bool, String> {
        let placements = self.stats.placements;
        let gathered = self.gang_progress();
        self.heartbeat(t, n, Vec::new())?;
        Ok(self.stats.placements != placements || self.gang_progress() != gathered)
    }

    /// Debug builds: node `n`, skipped as fruitless, heartbeating now would indeed change
    /// nothing (checked on a copy of the core).
    #[cfg(debug_assertions)]
    fn check_fruitless(&self, t: Millis, n: usize) {
        let Some(node) = self.cluster.node(n) else {
            return;
        };
        let mut core = self.cluster.core().clone();
        let heartbeat = fairsched_core::protocol::NodeHeartbeat {
            finished: Vec::new(),
        };
        let response = core.process_heartbeat(t, node.id(), heartbeat);
        assert!(
            response
                .as_ref()
                .is_ok_and(|r| r.start.is_empty() && r.interrupt.is_empty() && r.abort.is_empty()),
            "node {} skipped as fruitless at {t} ms would have done {response:?}",
            node.id()
        );
    }

    /// Heartbeats the nodes with room not `visited` at this instant, while jobs are pending.
    fn heartbeat_nodes_with_room(
        &mut self,
        t: Millis,
        visited: &mut BTreeSet<usize>,
    ) -> Result<(), String> {
        if self.pending_allocations == 0 {
            return Ok(());
        }
        // A node whose room (and tags) another node of this instant already had without
        // starting anything would start nothing either: skip it.
        let mut fruitless: Vec<(Resources, usize)> = Vec::new();
        let mut fruitless_held: Vec<(Resources, usize, GangHolds)> = Vec::new();
        for n in self.cluster.nodes_with_room() {
            if self.pending_allocations == 0 {
                break;
            }
            let Some(node) = self.cluster.node(n) else {
                continue;
            };
            let free = node.free();
            let group = self.node_group[n];
            if within_fruitless(&fruitless, group, &free) {
                continue;
            }
            if visited.insert(n) {
                // A node gangs hold jobs on, whose room is within that of a node of its group
                // where the same gangs held the same jobs and whose heartbeat changed nothing,
                // with nothing started since, would change nothing either.
                let version = self.cluster.core().holds_version();
                // What gangs hold here is looked up before the heartbeat only to compare it
                // with the nodes that changed nothing so far.
                let before = (!fruitless_held.is_empty()).then(|| self.holds_here(n));
                if let Some((_, Some(h))) = &before
                    && (fruitless_held.iter())
                        .any(|(f, g, k)| *g == group && k == h && f.dominates(&free))
                {
                    #[cfg(debug_assertions)]
                    self.check_fruitless(t, n);
                    continue;
                }
                if self.heartbeat_changes(t, n)? {
                    fruitless_held.clear();
                    continue;
                }
                // What is held is as before the heartbeat if no hold changed anywhere; else
                // the node tells about others only if its gangs' holds are as before.
                let (held, holds) = if self.cluster.core().holds_version() == version {
                    before.unwrap_or_else(|| self.holds_here(n))
                } else {
                    let after = self.holds_here(n);
                    match before {
                        Some((_, b)) if b == after.1 => after,
                        _ => (after.0, None),
                    }
                };
                // A node whose room is held (a gang gathering, a reservation) tells nothing
                // about the room of others; nor does one a gang just took.
                if !held {
                    fruitless.push((free, group));
                } else if let Some(h) = holds {
                    fruitless_held.push((free, group, h));
                }
            }
        }
        Ok(())
    }

    /// Whether something holds resources on node `n` (a gang's jobs, a job reservation), and
    /// the jobs gangs hold there, by gang and task (`None`: nothing held there, or a job
    /// reservation holds room there too).
    fn holds_here(&self, n: usize) -> (bool, Option<GangHolds>) {
        let Some(id) = self.cluster.node(n).map(|node| node.id()) else {
            return (false, None);
        };
        let core = self.cluster.core();
        if core.reserved_on(id) {
            return (true, None);
        }
        let holds: GangHolds = (core.all_gangs())
            .filter_map(|a| Some((a.operation.clone(), a.holds.get(id)?.clone())))
            .collect();
        (!holds.is_empty(), (!holds.is_empty()).then_some(holds))
    }

    /// Whether something holds resources on node `n` (a gang's jobs, a job reservation).
    fn holds_on(&self, n: usize) -> bool {
        let Some(id) = self.cluster.node(n).map(|node| node.id()) else {
            return false;
        };
        let core = self.cluster.core();
        core.reserved_on(id) || core.all_gangs().any(|a| a.holds.contains_key(id))
    }

    /// How far the gang gathering in the replay's tree is (jobs held, complete).
    fn gang_progress(&self) -> Option<(u32, bool)> {
        self.cluster
            .core()
            .gang_assembly(0)
            .map(|a| (a.held_jobs(), a.ready))
    }

    /// Heartbeats the nodes of the gangs that hold all they need, free, so that they start at
    /// this instant (the core starts held jobs at the nodes' next heartbeats).
    fn start_gathered_gang(&mut self, t: Millis) -> Result<(), String> {
        let core = self.cluster.core();
        let nodes: BTreeSet<NodeId> = core
            .all_gangs()
            .filter(|a| core.gang_starts(a))
            .flat_map(|a| a.holds.keys().cloned())
            .collect();
        for id in nodes {
            if let Some(n) = self.cluster.node_number(&id) {
                self.heartbeat(t, n, Vec::new())?;
            }
        }
        Ok(())
    }

    fn progress(&self, t: Millis) -> ProgressUpdate {
        ProgressUpdate {
            submitted: self.submitted_jobs,
            finished: self.finished_jobs,
            total: self.count as u64,
            t_ms: t,
        }
    }

    /// When the fair-share update that finds an element starving (by the clock alone since
    /// the last one) is due, while jobs wait: at the first update instant not before it. Not
    /// under the baselines: every job is a gang there, which never starts by preemption.
    fn next_status_update(&self) -> Option<Millis> {
        if self.pending_allocations == 0 || self.tree.jobs.always_rigid {
            return None;
        }
        let at = self.cluster.core().next_status_change()?;
        Some(
            at.max(
                self.last_update_ms
                    .map_or(0, |l| l.saturating_add(self.period)),
            )
            .max(self.end_ms),
        )
    }

    /// After a fair-share update at `t` that wants preemption (a preemption target with jobs
    /// that may start by preemption, see [`Scheduler::preemption_wanted`]), the nodes not
    /// `visited` at this instant that run an allocation its operation's classes let be
    /// preempted heartbeat, in node order, as the periodic heartbeats of a real cluster
    /// would (full nodes too: the others cannot preempt). A round that changed nothing is not
    /// repeated until something started, ended or was submitted since, or the targets
    /// changed.
    fn preemption_round(&mut self, t: Millis, visited: &mut BTreeSet<usize>) -> Result<(), String> {
        if !self.cluster.core().preemption_wanted() {
            return Ok(());
        }
        let state = self.round_state();
        if self.fruitless_round.as_ref() == Some(&state) {
            return Ok(());
        }
        let nodes: BTreeSet<usize> = (self.cluster.core().nodes_with_preemptible_allocations())
            .iter()
            .filter_map(|id| self.cluster.node_number(id))
            .collect();
        for n in nodes {
            if visited.insert(n) {
                self.heartbeat(t, n, Vec::new())?;
            }
        }
        let after = self.round_state();
        self.fruitless_round = (after == state).then_some(after);
        Ok(())
    }

    /// What a fruitless preemption round is compared with: placements, preemptions,
    /// allocations ended and jobs submitted so far, and the preemption targets.
    fn round_state(&self) -> RoundState {
        RoundState {
            counts: [
                self.stats.placements,
                self.stats.preemptions,
                self.finished_allocations,
                self.submitted_jobs,
            ],
            targets: (self.cluster.core().preemption_targets())
                .map(|(t, id)| (t, id.clone()))
                .collect(),
        }
    }

    /// Nothing is scheduled to happen but jobs wait: one more fair-share update and a
    /// heartbeat of every node, a period later. True if that started something (the loop
    /// goes on), false if nothing can change any more.
    fn stalled_round(&mut self) -> Result<bool, String> {
        let t = self.end_ms + self.period;
        self.end_ms = t;
        self.stats.instants += 1;
        self.cluster.call(|core| core.update_fair_share(t));
        self.after_update(t);
        let placements = self.stats.placements;
        let gathered = self.gang_progress();
        for n in self.cluster.node_numbers() {
            self.heartbeat(t, n, Vec::new())?;
        }
        self.start_gathered_gang(t)?;
        Ok(self.stats.placements > placements
            || self.cluster.has_ends()
            || self.gang_progress() != gathered)
    }

    /// The core's periodic work, when it can matter: with no allocation pending, fair shares
    /// decide nothing (no one waits, and preemption is only for someone who waits), so the
    /// update is left for the next instant at which someone does. While jobs wait, an update
    /// that is due runs when new operations wait for it (they cannot start before) or when
    /// the last one is [`QUIET_REFRESH_PERIODS`] periods old; in between, heartbeats use the
    /// last fair shares with current usage.
    fn tick(&mut self, t: Millis) -> Result<(), String> {
        if self.pending_allocations == 0 {
            // Nothing waits, so nothing waits for an update either.
            self.waiting_for_update = false;
            return Ok(());
        }
        let since = |periods: u64| {
            self.last_update_ms
                .is_none_or(|last| t >= last.saturating_add(self.period.saturating_mul(periods)))
        };
        let due = since(1);
        let stale = self.quiet_refresh && since(QUIET_REFRESH_PERIODS);
        let status_changes = self.next_status_update().is_some_and(|at| at <= t);
        if ((self.waiting_for_update || status_changes) && due) || stale {
            // The replay decides when the core updates (the core's own period check in
            // `tick` would agree, but the replay must not wait for a wake-up the core
            // declines).
            self.cluster.call(|core| {
                core.update_fair_share(t);
                // The replay keeps each job's record itself: the core need not keep the
                // operations that finished (memory per job stays flat over a long trace).
                core.forget_finished_operations();
            });
            self.after_update(t);
        }
        self.absorb_events(t)
    }

    fn after_update(&mut self, t: Millis) {
        self.last_update_ms = Some(t);
        self.waiting_for_update = false;
    }

    /// Submits job `j` at `t`, or records why it cannot run.
    fn submit(&mut self, t: Millis, j: usize) -> Result<(), String> {
        let job = &self.trace.jobs[j];
        let (per_allocation, allocations) = match self.cut(job) {
            Ok(cut) => cut,
            Err(reason) => {
                self.records[j].state = JobState::Skipped(reason);
                self.outcomes.push(j);
                return Ok(());
            }
        };
        let pool = self.tree.pool_for(&job.group);
        // Rigid: a job of several allocations is a gang, started whole.
        let rules = self.tree.jobs;
        let gang = rules.always_rigid || (self.rigid && allocations.0 + allocations.1 > 1);
        let time_limit_ms = if rules.time_limits {
            // A limit is positive: a job that ran 0 ms is expected to run 1 ms.
            job.time_limit_ms
                .or(rules.estimate_missing.then_some(job.duration_ms.max(1)))
        } else {
            None
        };
        let mut tasks = Vec::new();
        for (resources, jobs) in [
            (per_allocation.0, allocations.0),
            (per_allocation.1, allocations.1),
        ] {
            if jobs > 0 {
                tasks.push(serde_json::json!({
                    "job_count": jobs,
                    "resources": resources,
                    "time_limit_ms": time_limit_ms,
                    "gang": gang,
                }));
            }
        }
        let mut spec = serde_json::json!({
            "id": job.id,
            "user": policy::pool_name(&job.user),
            "tasks": tasks,
        });
        if let Some(pool) = &pool {
            spec["pool"] = pool.clone().into();
        }
        if let Some(filter) = &job.tag_filter {
            spec["scheduling_tag_filter"] = filter.clone().into();
        }
        let spec: OperationSpec = serde_json::from_value(spec)
            .map_err(|e| format!("job {} (line {}): {e}", job.id, job.line))?;
        let total = allocations.0 + allocations.1;
        self.records[j].pool.clone_from(&pool);
        self.records[j].allocations = total;
        let lazy_pool = pool.as_ref().zip(self.tree.group_pool.as_ref());
        if let Some((name, config)) = lazy_pool
            && !self.group_jobs.contains_key(name)
        {
            if let Err(e) = self
                .cluster
                .call(|core| core.create_pool(t, None, name, config.clone()))
            {
                self.records[j].state = JobState::Failed(format!("its group's pool: {e}"));
                self.outcomes.push(j);
                self.finished_jobs += 1;
                return self.absorb_events(t);
            }
            self.group_jobs.insert(name.clone(), 0);
            self.stats.group_pools_created += 1;
        }
        // Every task's jobs run the trace's run time (see `heartbeat`); it is checked as the
        // core checked it when its tasks carried it.
        let started = (0..spec.tasks.len())
            .try_for_each(|i| {
                let field = format!("tasks[{i}].duration_ms");
                check_duration(&job.id, &field, Some(job.duration_ms))
            })
            .and_then(|()| self.cluster.call(|core| core.start_operation(t, spec)));
        match started {
            Ok(()) => {
                if let Some((name, _)) = lazy_pool {
                    *self.group_jobs.entry(name.clone()).or_default() += 1;
                }
                self.by_operation.insert(OperationId(job.id.clone()), j);
                self.pending[j] = total;
                self.pending_allocations += u64::from(total);
                self.jobs_in_system += 1;
                self.submitted_jobs += 1;
                self.waiting_for_update = true;
                let smallest = if allocations.1 > 0 {
                    per_allocation.1
                } else {
                    per_allocation.0
                };
                // Room is for the smallest allocation of the trace so far.
                let was = self.cluster.room_needed();
                let needed = if was == Resources::ZERO {
                    smallest
                } else {
                    was.min(&smallest)
                };
                self.cluster.set_room_needed(needed);
                // A smaller allocation than any before: nodes left out as too full may now
                // have room (rare: the minimum only falls).
                if needed != was && was != Resources::ZERO {
                    self.cluster.recheck_room();
                }
            }
            Err(e) => {
                self.records[j].state = JobState::Failed(e.message().to_string());
                self.outcomes.push(j);
                self.finished_jobs += 1;
                if let Some((name, _)) = lazy_pool {
                    self.release_group_pool(t, name);
                }
            }
        }
        self.absorb_events(t)
    }

    /// A group pool created for the replay goes when its group has no unfinished job left.
    /// Should the core refuse (say, an ephemeral user pool still under it), the pool stays and
    /// is reused; the next time the group empties, removal is tried again.
    fn release_group_pool(&mut self, t: Millis, name: &str) {
        if self.group_jobs.get(name) == Some(&0)
            && self.cluster.call(|core| core.remove_pool(t, name)).is_ok()
        {
            self.group_jobs.remove(name);
            self.stats.group_pools_removed += 1;
        }
    }

    /// Cuts a job into allocations of at most the largest node: (full, remainder) resources
    /// and counts.
    #[allow(clippy::type_complexity)]
    fn cut(
        &self,
        job: &crate::trace::TraceJob,
    ) -> Result<((Resources, Resources), (u32, u32)), String> {
        let slot = Resources::ZERO.with(ResourceKind::UserSlots, 1.0);
        let per_node = units_in(&self.largest, &job.unit);
        if per_node == 0 || self.largest.raw_of(ResourceKind::UserSlots) == 0 {
            return Err("larger than any node".to_string());
        }
        let width = u64::from(job.width.max(1));
        let per_node = per_node.min(width);
        let full = width / per_node;
        let rest = width % per_node;
        let capacity = self
            .node_groups
            .iter()
            .map(|g| u64::from(g.count).saturating_mul(units_in(&g.resources, &job.unit)))
            .fold(0u64, u64::saturating_add);
        if width > capacity {
            return Err("wider than the machine".to_string());
        }
        let scaled = |k: u64| job.unit.scale(k as f64).add(&slot);
        let full_count = u32::try_from(full).map_err(|_| "too many allocations".to_string())?;
        Ok((
            (scaled(per_node), scaled(rest)),
            (full_count, u32::from(rest > 0)),
        ))
    }

    /// Node `n` heartbeats at `t`, reporting `finished`; the jobs the core starts run their
    /// trace run time.
    fn heartbeat(
        &mut self,
        t: Millis,
        n: usize,
        finished: Vec<FinishedAllocation>,
    ) -> Result<(), String> {
        self.stats.heartbeats += 1;
        let (trace, by_operation) = (self.trace, &self.by_operation);
        let carried = self
            .cluster
            .heartbeat(t, n, finished, &mut |start| {
                let &j = by_operation.get(&start.operation)?;
                Some(JobModel::runs_for(Some(trace.jobs[j].duration_ms)).with_tag(j))
            })
            .map_err(|e| {
                let id = self
                    .cluster
                    .node(n)
                    .map_or("?", |node| node.id().0.as_str());
                format!("heartbeat of node {id}: {e}")
            })?;
        for job in carried.started {
            let j = job.tag;
            self.pending[j] = self.pending[j].saturating_sub(1);
            self.pending_allocations = self.pending_allocations.saturating_sub(1);
            self.stats.placements += 1;
            self.records[j].first_start_ms.get_or_insert(t);
        }
        self.preempted(carried.aborted);
        self.absorb_events(t)
    }

    /// The core aborted (preempted) these jobs: each goes back to pending.
    fn preempted(&mut self, aborted: Vec<JobRef>) {
        for job in aborted {
            let j = job.tag;
            self.records[j].preemptions += 1;
            self.pending[j] += 1;
            self.pending_allocations += 1;
            self.stats.preemptions += 1;
        }
    }

    /// Carries out the core's orders, then follows its events for the operations that
    /// finished.
    fn absorb_events(&mut self, t: Millis) -> Result<(), String> {
        // Orders given outside a heartbeat: carried out at once.
        let aborted = self.cluster.deliver_orders(t).aborted;
        self.preempted(aborted);
        for event in self.cluster.core_mut().take_events() {
            let EventKind::OperationState {
                operation,
                state,
                reason,
            } = event.kind
            else {
                continue;
            };
            let Some(&j) = self.by_operation.get(&operation) else {
                continue;
            };
            if state.is_finished() {
                self.by_operation.remove(&operation);
            }
            match state {
                OperationState::Completed => {
                    self.records[j].state = JobState::Completed;
                    self.records[j].finish_ms = Some(t);
                }
                OperationState::Failed | OperationState::Aborted => {
                    self.records[j].state =
                        JobState::Failed(reason.unwrap_or_else(|| state.name().to_string()));
                    self.records[j].finish_ms = Some(t);
                }
                OperationState::Pending | OperationState::Running => continue,
            }
            self.pending_allocations = self
                .pending_allocations
                .saturating_sub(u64::from(self.pending[j]));
            self.pending[j] = 0;
            self.jobs_in_system = self.jobs_in_system.saturating_sub(1);
            self.finished_jobs += 1;
            self.outcomes.push(j);
            if self.tree.group_pool.is_some()
                && let Some(name) = self.records[j].pool.clone()
                && let Some(count) = self.group_jobs.get_mut(&name)
            {
                *count = count.saturating_sub(1);
                self.release_group_pool(t, &name);
            }
        }
        Ok(())
    }

    fn sample(&mut self, t: Millis) {
        if t < self.next_sample {
            return;
        }
        let used: i64 = self
            .cluster
            .nodes()
            .map(|n| n.used().raw_of(self.measured))
            .sum();
        let total = self.total.raw_of(self.measured);
        self.series.push(Sample {
            t_ms: t,
            utilization: if total > 0 {
                used as f64 / total as f64
            } else {
                0.0
            },
            running_allocations: self.cluster.running_jobs(),
            pending_allocations: self.pending_allocations,
            jobs_in_system: self.jobs_in_system,
        });
        self.next_sample = t + self.sample_every;
    }

    fn report(self, options: &ReplayOptions) -> ReplayReport {
        ReplayReport {
            policy: options.policy_name(),
            job_model: if self.rigid { "rigid" } else { "malleable" },
            nodes: self.node_groups,
            total_resources: self.total,
            records: self.records,
            series: self.series,
            usage: self.usage,
            measured: self.measured,
            stats: ReplayStats {
                fair_share_updates: self.cluster.core().stats.fair_share_updates,
                ..self.stats
            },
            end_ms: self.end_ms,
            fair_share_update_period_ms: self.period,
        }
    }
}

/// How many `unit`s fit in `resources` (user slots aside: every allocation takes one).
fn units_in(resources: &Resources, unit: &Resources) -> u64 {
    ResourceKind::ALL
        .into_iter()
        .filter(|&k| k != ResourceKind::UserSlots && unit.raw_of(k) > 0)
        .map(|k| u64::try_from(resources.raw_of(k) / unit.raw_of(k)).unwrap_or(0))
        .min()
        .unwrap_or(u64::MAX)
}
