//! `fairsched scenario FILE [--out DIR] [--stats]`, with its output streams passed in so that
//! tests can run it in process.

use super::format::{Scenario, load_file};
use super::runner::{RunReport, RunStats, StopReason, run};
use fairsched_core::Millis;
use serde::Serialize;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Exit status: the scenario ran.
pub const EXIT_OK: u8 = 0;
/// Exit status: output could not be written.
pub const EXIT_IO: u8 = 1;
/// Exit status: the scenario file is malformed (every problem is printed with the file and
/// the JSON path).
pub const EXIT_BAD_FILE: u8 = 2;

/// The command's arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// The scenario file.
    pub file: PathBuf,
    /// Also write `events.jsonl`, `snapshots.jsonl` and `summary.json` into this directory
    /// (created if missing).
    pub out: Option<PathBuf>,
    /// Print one JSON line of counters to `stderr` at the end.
    pub stats: bool,
}

/// `summary.json`.
#[derive(Serialize)]
struct Summary<'a> {
    file: String,
    name: Option<&'a str>,
    until_ms: Millis,
    end_ms: Millis,
    stopped: StopReason,
    event_lines: u64,
    error_lines: u64,
    snapshots: usize,
    #[serde(flatten)]
    stats: RunStats,
}

/// Runs the command: the event lines, then the snapshot lines, on `stdout`; problems (and the
/// `--stats` line) on `stderr`. Returns the exit status.
pub fn main(options: &Options, stdout: &mut dyn Write, stderr: &mut dyn Write) -> u8 {
    let scenario = match load_file(&options.file) {
        Ok(s) => s,
        Err(e) => {
            for line in e.to_string().lines() {
                let _ = writeln!(stderr, "error: {line}");
            }
            return EXIT_BAD_FILE;
        }
    };
    for w in &scenario.warnings {
        let _ = writeln!(stderr, "warning: {}: {w}", options.file.display());
    }
    match execute(options, &scenario, stdout) {
        Ok(report) => {
            if options.stats {
                let line = serde_json::to_string(&report.stats).unwrap_or_default();
                let _ = writeln!(stderr, "{line}");
            }
            EXIT_OK
        }
        Err(message) => {
            let _ = writeln!(stderr, "error: {message}");
            EXIT_IO
        }
    }
}

/// Writes to two sinks.
struct Tee<'a> {
    first: &'a mut dyn Write,
    second: Option<&'a mut dyn Write>,
}

impl Write for Tee<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.first.write_all(buf)?;
        if let Some(second) = self.second.as_mut() {
            second.write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.first.flush()?;
        if let Some(second) = self.second.as_mut() {
            second.flush()?;
        }
        Ok(())
    }
}

fn create(dir: &Path, name: &str) -> Result<BufWriter<File>, String> {
    let path = dir.join(name);
    File::create(&path)
        .map(BufWriter::new)
        .map_err(|e| format!("{}: cannot create: {e}", path.display()))
}

fn execute(
    options: &Options,
    scenario: &Scenario,
    stdout: &mut dyn Write,
) -> Result<RunReport, String> {
    let stdout_error = |e: io::Error| format!("cannot write the output: {e}");
    let (mut events_file, mut snapshots_file) = match &options.out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("{}: cannot create the directory: {e}", dir.display()))?;
            (
                Some(create(dir, "events.jsonl")?),
                Some(create(dir, "snapshots.jsonl")?),
            )
        }
        None => (None, None),
    };

    let report = {
        let mut tee = Tee {
            first: &mut *stdout,
            second: events_file.as_mut().map(|f| f as &mut dyn Write),
        };
        run(scenario, &mut tee).map_err(stdout_error)?
    };
    for line in &report.snapshots {
        writeln!(stdout, "{line}").map_err(stdout_error)?;
        if let Some(f) = snapshots_file.as_mut() {
            writeln!(f, "{line}").map_err(|e| format!("snapshots.jsonl: {e}"))?;
        }
    }
    stdout.flush().map_err(stdout_error)?;

    if let Some(dir) = &options.out {
        for (name, file) in [
            ("events.jsonl", events_file.as_mut()),
            ("snapshots.jsonl", snapshots_file.as_mut()),
        ] {
            if let Some(f) = file {
                f.flush().map_err(|e| format!("{name}: {e}"))?;
            }
        }
        let summary = Summary {
            file: options.file.display().to_string(),
            name: scenario.name.as_deref(),
            until_ms: scenario.until_ms,
            end_ms: report.end_ms,
            stopped: report.stopped,
            event_lines: report.event_lines,
            error_lines: report.error_lines,
            snapshots: report.snapshots.len(),
            stats: report.stats,
        };
        let mut text = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
        text.push('\n');
        let path = dir.join("summary.json");
        std::fs::write(&path, text)
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }
    Ok(report)
}
