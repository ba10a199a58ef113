//! What the commands that run async code share: the tokio runtime, logs on stderr and the
//! signals that stop a daemon.

/// A multi-threaded runtime with I/O and timers.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Logs to stderr, filtered by `FAIRSCHED_LOG` (default `warn`), coloured only on a terminal
/// (a file or journald gets plain text).
pub(crate) fn init_tracing() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("FAIRSCHED_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Resolves on Ctrl-C or SIGTERM.
///
/// The handlers are installed when this is called (inside a runtime), not when the future is
/// first polled: a SIGTERM right after the server printed its address stops it cleanly instead
/// of killing it.
pub(crate) fn stop_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
}
