//! Loads workload traces and prints what was read, to check the readers on real files:
//!
//! ```text
//! cargo run --release -p fairsched-sim --example trace_load -- FILE [--format swf|alibaba-gpu] [FILE ...]
//! ```
//!
//! One JSON line per file: jobs, records skipped and adjustments by reason, the machine, the
//! first and last submission, and the load time; or the error.

use fairsched_sim::trace::{Trace, TraceFormat, load};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

fn summary(trace: &Trace, path: &str, load_ms: f64) -> Value {
    let machine = trace.machine.as_ref().map(|groups| {
        groups
            .iter()
            .map(
                |g| json!({"count": g.count, "resources": g.resources.to_string(), "tags": g.tags}),
            )
            .collect::<Vec<_>>()
    });
    let widest = trace.jobs.iter().map(|j| j.width).max();
    json!({
        "file": path,
        "format": trace.format.name(),
        "jobs": trace.jobs.len(),
        "skipped": trace.skipped,
        "adjusted": trace.adjusted,
        "machine": machine,
        "last_submit_ms": trace.jobs.last().map(|j| j.submit_ms),
        "widest": widest,
        "with_tag_filter": trace.jobs.iter().filter(|j| j.tag_filter.is_some()).count(),
        "load_ms": (load_ms * 10.0).round() / 10.0,
    })
}

fn main() -> ExitCode {
    let mut format: Option<TraceFormat> = None;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--format" {
            match args.next().as_deref().map(str::parse::<TraceFormat>) {
                Some(Ok(f)) => format = Some(f),
                Some(Err(e)) => {
                    eprintln!("{e}");
                    return ExitCode::from(2);
                }
                None => {
                    eprintln!("--format needs a value");
                    return ExitCode::from(2);
                }
            }
        } else {
            files.push(PathBuf::from(arg));
        }
    }
    let mut code = ExitCode::SUCCESS;
    for path in &files {
        let start = Instant::now();
        let line = match load(path, format) {
            Ok(trace) => summary(
                &trace,
                &path.display().to_string(),
                start.elapsed().as_secs_f64() * 1000.0,
            ),
            Err(e) => {
                code = ExitCode::FAILURE;
                json!({"file": path.display().to_string(), "error": e.to_string()})
            }
        };
        println!("{line}");
    }
    code
}
