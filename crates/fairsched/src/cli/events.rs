//! `fairsched events`: the event log, and with `--follow` the events as they happen.

use super::{Conn, print_json};
use crate::args::parse_since;
use clap::Args;
use fairsched_api::client::ClientError;
use fairsched_api::{EventQuery, EventView};
use serde_json::Value;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only events of this operation.
    #[arg(long)]
    operation: Option<String>,
    /// Only events on this node.
    #[arg(long)]
    node: Option<String>,
    /// Only events of this job (its id).
    #[arg(long)]
    job: Option<String>,
    /// Only these events, comma-separated (allocation_started, allocation_finished,
    /// allocation_interrupted, allocation_preempted, operation_state, operation_updated, error,
    /// job_adopted, node_registered, node_lost, node_changed, tree_applied).
    #[arg(long)]
    kind: Option<String>,
    /// Events after this sequence number (the first column).
    #[arg(long)]
    after: Option<u64>,
    /// Events since a time: Unix milliseconds, or a duration ago (`90s`, `10m`, `2h`, `1d`).
    #[arg(long, value_parser = parse_since)]
    since: Option<u64>,
    /// At most this many (at most 10000).
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Keep printing events as they happen.
    #[arg(long, short = 'f')]
    follow: bool,
}

pub async fn run(conn: Conn, args: EventsArgs) -> anyhow::Result<()> {
    let client = conn.client()?;
    let query = EventQuery {
        operation: args.operation,
        node: args.node,
        job: args.job,
        kind: args.kind,
        since: args.since,
        after: args.after,
        limit: Some(args.limit),
    };
    // Following from now on (no --after or --since): the newest event of all, before reading
    // the filtered ones, is where the stream starts at the latest.
    let now_seq = if args.follow && query.after.is_none() && query.since.is_none() {
        let newest = client
            .events(&EventQuery {
                limit: Some(1),
                ..EventQuery::default()
            })
            .await?;
        newest.last().map_or(0, |e| e.seq)
    } else {
        0
    };
    let events = client.events(&query).await?;
    if conn.json && !args.follow {
        return print_json(&events);
    }
    let print = |e: &EventView| {
        if conn.json {
            println!("{}", serde_json::to_string(e).unwrap_or_default());
        } else {
            println!("{}", event_line(e));
        }
    };
    for e in &events {
        print(e);
    }
    if !args.follow {
        return Ok(());
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let mut after = events
        .last()
        .map(|e| e.seq)
        .or(query.after)
        .unwrap_or(0)
        .max(now_seq);
    // Follow until stopped: when the server goes away (a restart, a network blip) the stream
    // is opened again from the last event printed, so nothing is missed or printed twice (the
    // log is durable and its numbers are never reused). Errors the server answers with (a bad
    // filter) end the command.
    let mut backoff = FOLLOW_BACKOFF_MIN;
    loop {
        let lost = match client
            .event_stream(&EventQuery {
                after: Some(after),
                limit: None,
                ..query.clone()
            })
            .await
        {
            Err(ClientError::Api(e)) => return Err(e.into()),
            Err(e) => e.to_string(),
            Ok(mut stream) => loop {
                match stream.next().await {
                    Ok(Some(e)) => {
                        after = after.max(e.seq);
                        print(&e);
                        let _ = std::io::stdout().flush();
                        backoff = FOLLOW_BACKOFF_MIN;
                    }
                    Ok(None) => break "the server ended the event stream".to_string(),
                    Err(ClientError::Api(e)) => return Err(e.into()),
                    Err(e) => break e.to_string(),
                }
            },
        };
        eprintln!(
            "events: {lost}; reconnecting in {:.1} s (from event {after})",
            backoff.as_secs_f64()
        );
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(FOLLOW_BACKOFF_MAX);
    }
}

/// `events --follow` waits this long before reconnecting, doubling up to the maximum.
const FOLLOW_BACKOFF_MIN: Duration = Duration::from_millis(250);
const FOLLOW_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// `2026-11-22 10:04:05.123` (UTC) from Unix milliseconds.
fn utc_time(unix_ms: u64) -> String {
    let (days, ms) = (unix_ms / 86_400_000, unix_ms % 86_400_000);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// One event as a line: sequence number, time (UTC), name, then its fields.
fn event_line(e: &EventView) -> String {
    let mut line = format!("{:>7}  {}  {:<22}", e.seq, utc_time(e.unix_ms), e.kind());
    let first = ["operation", "job", "node"];
    let rest = e
        .fields
        .iter()
        .filter(|(k, _)| !first.contains(&k.as_str()) && *k != "event" && *k != "t_ms");
    let named = first
        .iter()
        .filter_map(|k| e.fields.get_key_value(*k))
        .chain(rest);
    for (k, v) in named {
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        line.push_str(&format!(" {k}={v}"));
    }
    line
}
