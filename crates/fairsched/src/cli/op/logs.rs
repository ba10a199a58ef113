//! `op logs [--follow]`: the output of an operation's jobs, finished and running.

use fairsched_api::client::ApiClient;
use fairsched_api::{JobLogs, JobState, LogsQuery, OperationState, StreamRange};
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

/// How often `--follow` asks for new output.
const POLL: Duration = Duration::from_millis(300);
/// Jobs per logs request of `--follow` (the job ids go in the URL).
const JOBS_PER_REQUEST: usize = 100;

/// A job's heading: `== job 0.7 on n1 (running) ==`.
fn heading(l: &JobLogs, stream: &str) -> String {
    let state = l.state.map(|s| format!(" ({s})")).unwrap_or_default();
    format!("== job {} on {}{state}{stream} ==", l.job, l.node)
}

fn skipped_line(range: &StreamRange) -> Option<String> {
    (range.skipped > 0).then(|| format!("... {} bytes skipped ...", range.skipped))
}

/// Prints one job's output (`op logs` without `--follow`).
pub(super) fn print(l: &JobLogs) {
    println!("{}", heading(l, ""));
    if let Some(live) = &l.live
        && live.waiting
    {
        println!(
            "(its output is being fetched from {}: run op logs again)",
            l.node
        );
        return;
    }
    let live = l.live.as_ref();
    if let Some(line) = live.and_then(|v| skipped_line(&v.stdout)) {
        println!("{line}");
    }
    print!("{}", l.stdout);
    let err_skipped = live.and_then(|v| skipped_line(&v.stderr));
    if !l.stderr.is_empty() || err_skipped.is_some() {
        end_line(&l.stdout);
        println!("-- stderr --");
        if let Some(line) = err_skipped {
            println!("{line}");
        }
        print!("{}", l.stderr);
    }
    end_line(if l.stderr.is_empty() {
        &l.stdout
    } else {
        &l.stderr
    });
}

/// Ends an unfinished last line, so that the next heading starts a line.
fn end_line(text: &str) {
    if !text.is_empty() && !text.ends_with('\n') {
        println!();
    }
}

/// What `--follow` printed of one job.
#[derive(Debug, Default)]
struct Seen {
    /// Where its live output printed so far ends (stdout, stderr).
    from: Option<(u64, u64)>,
    /// Its output is printed to its end.
    done: bool,
}

/// Prints output as it comes, with a heading whenever the job or stream changes.
#[derive(Debug, Default)]
struct Printer {
    /// (job, stream) printed last.
    current: Option<(String, &'static str)>,
    /// The last text printed ended its line.
    mid_line: bool,
}

impl Printer {
    fn text(&mut self, l: &JobLogs, stream: &'static str, note: Option<String>, text: &str) {
        if text.is_empty() && note.is_none() {
            return;
        }
        let key = (l.job.clone(), stream);
        if self.current.as_ref() != Some(&key) {
            self.line(&heading(
                l,
                if stream == "stderr" { ": stderr" } else { "" },
            ));
            self.current = Some(key);
        }
        if let Some(note) = note {
            self.line(&note);
        }
        print!("{text}");
        if !text.is_empty() {
            self.mid_line = !text.ends_with('\n');
        }
    }

    /// A line of its own.
    fn line(&mut self, line: &str) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
        println!("{line}");
    }
}

/// Standard output flushed; a closed one ends the command as a closed pipe does elsewhere.
fn flush() {
    if let Err(e) = std::io::stdout().flush()
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(141);
    }
}

/// `op logs --follow`: prints the output there is, then new output as it comes, until the
/// operation has ended and its jobs' output is printed to their end. With `json`, one object
/// per line for each job with new output.
pub(super) async fn follow(client: &ApiClient, id: &str, json: bool) -> anyhow::Result<()> {
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    let mut printer = Printer::default();
    loop {
        // The state first: once it has ended, what is read after it is the jobs' last output.
        let op = client.get_operation(id).await?;
        let ended = !matches!(op.state, OperationState::Pending | OperationState::Running);
        let todo: Vec<&str> = op
            .jobs
            .iter()
            .map(|j| j.id.as_str())
            .filter(|j| !seen.get(*j).is_some_and(|s| s.done))
            .collect();
        for batch in todo.chunks(JOBS_PER_REQUEST) {
            let from: Vec<String> = batch
                .iter()
                .filter_map(|j| {
                    let (o, e) = seen.get(*j)?.from?;
                    Some(format!("{j}:{o}:{e}"))
                })
                .collect();
            let query = LogsQuery {
                jobs: Some(batch.join(",")),
                from: (!from.is_empty()).then(|| from.join(",")),
            };
            for mut l in client.operation_logs_with(id, &query).await? {
                // (A server before live output says no state: the operation's view does.)
                if l.state.is_none() {
                    l.state = op.jobs.iter().find(|j| j.id == l.job).map(|j| j.state);
                }
                let s = seen.entry(l.job.clone()).or_default();
                show(&mut printer, s, &l, json);
            }
        }
        flush();
        if ended
            && op
                .jobs
                .iter()
                .all(|j| seen.get(&j.id).is_some_and(|s| s.done))
        {
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Prints what is new in `l` and notes it in `s`.
fn show(printer: &mut Printer, s: &mut Seen, l: &JobLogs, json: bool) {
    let running = l.state == Some(JobState::Running);
    match &l.live {
        Some(live) if live.waiting => {}
        Some(live) => {
            let new = !l.stdout.is_empty()
                || !l.stderr.is_empty()
                || live.stdout.skipped > 0
                || live.stderr.skipped > 0;
            if json {
                if new {
                    println!("{}", serde_json::to_string(l).unwrap_or_default());
                }
            } else {
                printer.text(l, "stdout", skipped_line(&live.stdout), &l.stdout);
                printer.text(l, "stderr", skipped_line(&live.stderr), &l.stderr);
            }
            s.from = Some((live.stdout.end, live.stderr.end));
            if live.complete || !running {
                s.done = true;
            }
        }
        None if running => {}
        None => {
            // Ended, without its output to its end live: its stored last bytes.
            if json {
                println!("{}", serde_json::to_string(l).unwrap_or_default());
            } else {
                let note = s.from.is_some().then(|| {
                    "... its last output as stored (may repeat what was shown) ...".to_string()
                });
                printer.text(l, "stdout", note, &l.stdout);
                printer.text(l, "stderr", None, &l.stderr);
            }
            s.done = true;
        }
    }
    if s.done && !json {
        let state = l.state.map_or("ended", JobState::name);
        printer.line(&format!("== job {} on {}: {state} ==", l.job, l.node));
        printer.current = None;
    }
}
