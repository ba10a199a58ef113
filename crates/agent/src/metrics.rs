//! The agent's own Prometheus metrics, served at `GET /metrics` on `--metrics-listen`
//! (OpenMetrics text, as the server's): what this node runs and how its talk with the server
//! goes. Cloning shares the values.

use fairsched_api::JobState as Outcome;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use std::sync::Arc;

type OneLabel = [(&'static str, &'static str); 1];

/// The agent's counters and gauges.
#[derive(Clone, Debug)]
pub struct AgentMetrics {
    /// Jobs running now.
    pub jobs_running: Gauge,
    /// Jobs started.
    pub jobs_started: Counter,
    /// Jobs that ended, by outcome (`completed`, `failed`, `aborted`).
    pub jobs_finished: Family<OneLabel, Counter>,
    /// Heartbeats and registrations that failed (unreachable server, refusals).
    pub server_errors: Counter,
    /// Seconds of each successful heartbeat, as the agent measured it.
    pub heartbeat_duration: Histogram,
}

pub(crate) const OUTCOMES: [Outcome; 3] = [Outcome::Completed, Outcome::Failed, Outcome::Aborted];

impl Default for AgentMetrics {
    fn default() -> Self {
        let m = AgentMetrics {
            jobs_running: Gauge::default(),
            jobs_started: Counter::default(),
            jobs_finished: Family::default(),
            server_errors: Counter::default(),
            // 100 µs .. ~6 s.
            heartbeat_duration: Histogram::new(exponential_buckets(1e-4, 2.0, 16)),
        };
        for o in OUTCOMES {
            m.jobs_finished
                .get_or_create(&[("outcome", o.name())])
                .inc_by(0);
        }
        m
    }
}

impl AgentMetrics {
    /// A job ended with `outcome`.
    pub(crate) fn finished(&self, outcome: Outcome) {
        if OUTCOMES.contains(&outcome) {
            self.jobs_finished
                .get_or_create(&[("outcome", outcome.name())])
                .inc();
        }
    }

    /// The registry `GET /metrics` encodes; `node` labels the build-info series.
    pub fn registry(&self, node: &str) -> Registry {
        let mut r = Registry::default();
        r.register(
            "fairsched_agent_jobs_running",
            "Jobs this agent runs now",
            self.jobs_running.clone(),
        );
        r.register(
            "fairsched_agent_jobs_started",
            "Jobs this agent started",
            self.jobs_started.clone(),
        );
        r.register(
            "fairsched_agent_jobs_finished",
            "Jobs of this agent that ended, by outcome",
            self.jobs_finished.clone(),
        );
        r.register(
            "fairsched_agent_server_errors",
            "Registrations and heartbeats that failed (server unreachable or refusing)",
            self.server_errors.clone(),
        );
        r.register_with_unit(
            "fairsched_agent_heartbeat_duration",
            "Round trip of a successful heartbeat",
            Unit::Seconds,
            self.heartbeat_duration.clone(),
        );
        let info: Family<[(&'static str, String); 2], Gauge> = Family::default();
        info.get_or_create(&[
            ("version", env!("CARGO_PKG_VERSION").to_string()),
            ("node", node.to_string()),
        ])
        .set(1);
        r.register(
            "fairsched_agent_build_info",
            "Always 1; the agent's version and node in its labels",
            info,
        );
        r
    }
}

/// Serves `registry` at `GET /metrics` on `listener` until the task is dropped.
pub(crate) async fn serve(listener: tokio::net::TcpListener, registry: Registry) {
    use axum::http::header;
    let registry = Arc::new(registry);
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            async move {
                let mut text = String::new();
                match prometheus_client::encoding::text::encode(&mut text, &registry) {
                    Ok(()) => (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        text,
                    )
                        .into_response(),
                    Err(e) => (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        format!("cannot encode the metrics: {e}"),
                    )
                        .into_response(),
                }
            }
        }),
    );
    if let Err(e) = axum::serve(listener, app).await {
        tracing::warn!("the metrics endpoint stopped: {e}");
    }
}

use axum::response::IntoResponse;
