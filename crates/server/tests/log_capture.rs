//! The tests' log capture (`common::capture_logs`) sees every line its thread logs, even when
//! the line's callsite is first hit on another thread that has no subscriber, as happens when
//! tests that start servers run in parallel. Alone in its binary, so that no other test's
//! dispatcher hides the problem.

mod common;

/// A log line of its own (one callsite), logged on whichever thread calls it.
fn log_the_line() {
    tracing::info!("the line this test waits for");
}

#[test]
fn a_line_first_logged_on_another_thread_is_still_captured() {
    let (logs, guard) = common::capture_logs();
    // Another thread, with no subscriber, hits the callsite first.
    std::thread::spawn(log_the_line).join().unwrap();
    log_the_line();
    drop(guard);
    assert_eq!(
        logs.lines_with(&["INFO", "the line this test waits for"])
            .len(),
        1,
        "{}",
        logs.text()
    );
}
