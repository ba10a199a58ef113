//! The live output of running jobs: which jobs someone reads, what the heartbeat replies ask
//! their nodes for, and a bounded tail of each stream of theirs, in memory only.
//!
//! A read of a running job's output marks it watched for [`WATCH_FOR`]; while it is, every
//! reply to its node's heartbeat asks for its new output from where the server's copy ends
//! ([`OutputRequest`]), and the node sends it with its next heartbeat ([`JobOutput`], at
//! most [`fairsched_api::OUTPUT_CHUNK_BYTES`] per stream: with more, the newest bytes and a
//! gap). The server keeps the last [`LIVE_TAIL_BYTES`] of each stream of at most
//! [`MAX_WATCHED`] jobs; a job that ends while watched gets its output up to its end in the
//! heartbeat that reports the end (`ended`), and its copy stays until the watch expires. The
//! store keeps only the final tail, as before.

use fairsched_api::{JobOutput, LiveLogs, OutputRequest, StreamRange};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a read keeps a job watched.
pub const WATCH_FOR: Duration = Duration::from_secs(30);
/// The bytes of each stream of a watched job the server keeps (the newest).
pub const LIVE_TAIL_BYTES: usize = 64 * 1024;
/// The most jobs watched at once; a read of more jobs shows the others as waiting.
pub const MAX_WATCHED: usize = 256;

/// The newest bytes of one stream, from byte `start` of it.
#[derive(Debug, Default)]
struct Stream {
    start: u64,
    buf: Vec<u8>,
    received: bool,
}

impl Stream {
    fn end(&self) -> u64 {
        self.start + self.buf.len() as u64
    }

    /// Appends a chunk of bytes from `offset`. A chunk after a gap starts the copy again
    /// there (readers before the gap are told what they missed); bytes already held are not
    /// taken twice.
    fn apply(&mut self, offset: u64, data: &[u8]) {
        if !self.received || offset > self.end() {
            self.start = offset;
            self.buf.clear();
            self.buf.extend_from_slice(data);
            self.received = true;
        } else {
            let held = usize::try_from(self.end() - offset).unwrap_or(usize::MAX);
            if data.len() > held {
                self.buf.extend_from_slice(&data[held..]);
            }
        }
        if self.buf.len() > LIVE_TAIL_BYTES {
            let cut = self.buf.len() - LIVE_TAIL_BYTES;
            self.buf.drain(..cut);
            self.start += cut as u64;
        }
    }

    /// The text from byte `from` (or the oldest held), where it is, and what was skipped. An
    /// incomplete UTF-8 sequence at the end of a stream still written to is left for the next
    /// read (`end` stops before it), so that a character is not split between two reads.
    fn read(&self, from: u64, complete: bool) -> (String, StreamRange) {
        let begin = from.clamp(self.start, self.end());
        let mut bytes = &self.buf[(begin - self.start) as usize..];
        if !complete {
            bytes = &bytes[..complete_utf8_len(bytes)];
        }
        let range = StreamRange {
            offset: begin,
            end: begin + bytes.len() as u64,
            skipped: self.start.saturating_sub(from),
        };
        (String::from_utf8_lossy(bytes).into_owned(), range)
    }
}

/// The length of `bytes` without an incomplete UTF-8 sequence at its end (invalid bytes
/// count as complete: they are shown as U+FFFD).
fn complete_utf8_len(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=n.min(3) {
        let at = n - back;
        let b = bytes[at];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back for its lead byte
        }
        let needs = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if back < needs { at } else { n };
    }
    n
}

#[derive(Debug)]
struct Watched {
    node: String,
    until: Instant,
    stdout: Stream,
    stderr: Stream,
    /// The job ended (its node reported it).
    ended: bool,
    /// Its output up to its end arrived.
    complete: bool,
}

/// The watched jobs and their live output.
#[derive(Debug, Default)]
pub struct LiveOutput {
    jobs: BTreeMap<String, Watched>,
}

/// What a read of one job's live output returns.
#[derive(Debug)]
pub struct LiveRead {
    pub stdout: String,
    pub stderr: String,
    pub live: LiveLogs,
}

impl LiveOutput {
    /// Marks running job `job` (on `node`) watched until [`WATCH_FOR`] from `now`; `false`
    /// when [`MAX_WATCHED`] other jobs are.
    pub fn watch(&mut self, job: &str, node: &str, now: Instant) -> bool {
        self.expire(now);
        if let Some(w) = self.jobs.get_mut(job) {
            w.until = now + WATCH_FOR;
            return true;
        }
        if self.jobs.len() >= MAX_WATCHED {
            return false;
        }
        self.jobs.insert(
            job.to_string(),
            Watched {
                node: node.to_string(),
                until: now + WATCH_FOR,
                stdout: Stream::default(),
                stderr: Stream::default(),
                ended: false,
                complete: false,
            },
        );
        true
    }

    /// Forgets the jobs whose watch expired.
    pub fn expire(&mut self, now: Instant) {
        self.jobs.retain(|_, w| w.until > now);
    }

    /// What to ask `node` for: the new output of its watched jobs that still run.
    pub fn requests(&mut self, node: &str, now: Instant) -> Vec<OutputRequest> {
        self.expire(now);
        self.jobs
            .iter()
            .filter(|(_, w)| w.node == node && !w.ended)
            .map(|(job, w)| OutputRequest {
                job: job.clone(),
                stdout_from: w.stdout.received.then(|| w.stdout.end()),
                stderr_from: w.stderr.received.then(|| w.stderr.end()),
            })
            .collect()
    }

    /// Takes the output `node` sent (of its own watched jobs only; chunks that are not
    /// base64 are dropped).
    pub fn receive(&mut self, node: &str, output: &[JobOutput]) {
        for o in output {
            let Some(w) = self.jobs.get_mut(&o.job).filter(|w| w.node == node) else {
                continue;
            };
            for (chunk, stream) in [(&o.stdout, &mut w.stdout), (&o.stderr, &mut w.stderr)] {
                if let Some(c) = chunk {
                    match c.bytes() {
                        Some(bytes) => stream.apply(c.offset, &bytes),
                        None => tracing::debug!(job = o.job, "output chunk not in base64"),
                    }
                }
            }
            if o.ended {
                w.ended = true;
                // A stream with no chunk had nothing new (or nothing at all).
                w.stdout.received |= o.stdout.is_none();
                w.stderr.received |= o.stderr.is_none();
                w.complete = w.stdout.received && w.stderr.received;
            }
        }
    }

    /// Job `job` of `node` ended: its node is asked for nothing more.
    pub fn ended(&mut self, node: &str, job: &str) {
        if let Some(w) = self.jobs.get_mut(job).filter(|w| w.node == node) {
            w.ended = true;
        }
    }

    /// The live output of `job` from `from` (stdout, stderr offsets; none: the oldest held):
    /// `None` if it is not watched.
    pub fn read(&self, job: &str, from: Option<(u64, u64)>) -> Option<LiveRead> {
        let w = self.jobs.get(job)?;
        let (out_from, err_from) = from.unwrap_or((0, 0));
        let (stdout, out_range) = w.stdout.read(out_from, w.complete);
        let (stderr, err_range) = w.stderr.read(err_from, w.complete);
        Some(LiveRead {
            stdout,
            stderr,
            live: LiveLogs {
                stdout: out_range,
                stderr: err_range,
                waiting: !w.ended && !w.stdout.received && !w.stderr.received,
                complete: w.complete,
            },
        })
    }

    /// Whether `job`'s live output reaches its end.
    pub fn is_complete(&self, job: &str) -> bool {
        self.jobs.get(job).is_some_and(|w| w.complete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairsched_api::OutputChunk;

    fn chunk(job: &str, offset: u64, data: &[u8], ended: bool) -> JobOutput {
        JobOutput {
            job: job.into(),
            stdout: Some(OutputChunk::new(offset, data)),
            stderr: None,
            ended,
        }
    }

    #[test]
    fn asks_from_where_its_copy_ends_and_reads_from_an_offset() {
        let now = Instant::now();
        let mut live = LiveOutput::default();
        assert!(live.watch("j", "n1", now));
        let r = live.requests("n1", now);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].stdout_from, r[0].stderr_from), (None, None));
        assert!(live.requests("n2", now).is_empty(), "another node's job");
        assert!(live.read("j", None).unwrap().live.waiting);
        live.receive("n2", &[chunk("j", 0, b"forged", false)]);
        assert!(live.read("j", None).unwrap().live.waiting, "not its node");
        live.receive("n1", &[chunk("j", 0, b"one\n", false)]);
        let r = live.requests("n1", now);
        assert_eq!(r[0].stdout_from, Some(4));
        // A repeated chunk is not taken twice.
        live.receive("n1", &[chunk("j", 0, b"one\ntwo\n", false)]);
        let read = live.read("j", None).unwrap();
        assert_eq!(read.stdout, "one\ntwo\n");
        assert!(!read.live.waiting && !read.live.complete);
        assert_eq!(read.live.stdout.end, 8);
        let read = live.read("j", Some((4, 0))).unwrap();
        assert_eq!(
            (read.stdout.as_str(), read.live.stdout.skipped),
            ("two\n", 0)
        );
        // It expires.
        assert!(live.requests("n1", now + WATCH_FOR).is_empty());
        assert!(live.read("j", None).is_none());
    }

    #[test]
    fn keeps_a_bounded_tail_and_says_what_was_skipped() {
        let now = Instant::now();
        let mut live = LiveOutput::default();
        live.watch("j", "n1", now);
        let big = vec![b'x'; 40 * 1024];
        for i in 0..10u64 {
            live.receive("n1", &[chunk("j", i * big.len() as u64, &big, false)]);
        }
        let read = live.read("j", None).unwrap();
        assert_eq!(read.stdout.len(), LIVE_TAIL_BYTES);
        assert_eq!(
            read.live.stdout.skipped,
            400 * 1024 - LIVE_TAIL_BYTES as u64
        );
        assert_eq!(read.live.stdout.end, 400 * 1024);
        // A gap (the node sent its newest bytes only): a reader from before it is told.
        live.receive("n1", &[chunk("j", 1_000_000, b"after\n", false)]);
        let read = live.read("j", Some((400 * 1024, 0))).unwrap();
        assert_eq!(read.stdout, "after\n");
        assert_eq!(read.live.stdout.skipped, 1_000_000 - 400 * 1024);
    }

    #[test]
    fn a_character_is_not_split_and_bad_bytes_are_shown_lossily() {
        let now = Instant::now();
        let mut live = LiveOutput::default();
        live.watch("j", "n1", now);
        let e_acute = "é".as_bytes();
        live.receive(
            "n1",
            &[chunk("j", 0, &[b'a', 0xFF, b'b', e_acute[0]], false)],
        );
        let read = live.read("j", None).unwrap();
        assert_eq!(read.stdout, "a\u{FFFD}b");
        assert_eq!(read.live.stdout.end, 3, "the half character waits");
        live.receive("n1", &[chunk("j", 4, &e_acute[1..], true)]);
        live.ended("n1", "j");
        let read = live.read("j", Some((3, 0))).unwrap();
        assert_eq!(read.stdout, "é");
        assert!(read.live.complete);
        assert!(
            live.requests("n1", now).is_empty(),
            "an ended job is not asked for"
        );
        assert_eq!(complete_utf8_len(&[0xF0, 0x9F, 0x98]), 0);
        assert_eq!(complete_utf8_len("😀".as_bytes()), 4);
        assert_eq!(complete_utf8_len(&[b'a', 0x80]), 2);
    }

    #[test]
    fn watches_at_most_max_watched_jobs() {
        let now = Instant::now();
        let mut live = LiveOutput::default();
        for i in 0..MAX_WATCHED {
            assert!(live.watch(&format!("j{i}"), "n1", now));
        }
        assert!(!live.watch("one-more", "n1", now));
        assert!(live.watch("j0", "n1", now), "a watched job is renewed");
        assert!(
            live.watch("one-more", "n1", now + WATCH_FOR),
            "after they expire"
        );
    }
}
