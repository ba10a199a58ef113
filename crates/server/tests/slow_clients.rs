//! Slow and silent clients: a connection that does not send its request's headers in time is
//! closed, so that such clients cannot hold the server's connections (and file descriptors)
//! forever; clients that send whole requests are served meanwhile, and a graceful shutdown
//! still ends the server.

use axum::Router;
use axum::routing::get;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Whether the server closed `stream` within `limit` (it reads EOF or a reset).
fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            // An answer (e.g. 408) before the close: read on.
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

fn get_status(addr: std::net::SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.lines().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_do_not_send_their_headers_in_time_are_cut_off() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/x", get(|| async { "ok" }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(fairsched_server::http::serve_with(
        listener,
        app,
        async move {
            let _ = stopped.await;
        },
        Duration::from_millis(300),
    ));
    let report = tokio::task::spawn_blocking(move || {
        // (what the client sends, then stays silent) -> closed by the server in time
        let cases: &[(&str, &[u8])] = &[
            ("nothing at all", b""),
            ("half a request line", b"GET /x HT"),
            (
                "headers without their end",
                b"GET /x HTTP/1.1\r\nHost: t\r\n",
            ),
        ];
        let mut report = Vec::new();
        for (what, sent) in cases {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(sent).unwrap();
            let start = Instant::now();
            let closed = closed_within(&mut s, Duration::from_secs(5));
            report.push((*what, closed, start.elapsed() < Duration::from_secs(3)));
        }
        // A slowloris: a header line every 100 ms never finishes in time.
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /x HTTP/1.1\r\n").unwrap();
        let start = Instant::now();
        let mut cut = false;
        for i in 0..50 {
            std::thread::sleep(Duration::from_millis(100));
            if s.write_all(format!("X-Slow-{i}: 1\r\n").as_bytes())
                .is_err()
            {
                cut = true;
                break;
            }
        }
        let cut = cut || closed_within(&mut s, Duration::from_secs(1));
        report.push((
            "a header every 100 ms",
            cut,
            start.elapsed() < Duration::from_secs(3),
        ));
        // A keep-alive connection that goes quiet after its answer is closed as well.
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let mut buf = [0u8; 1024];
        let n = s.read(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        let closed = closed_within(&mut s, Duration::from_secs(5));
        report.push(("quiet after an answer", closed, true));
        // Whole requests are answered, while a silent connection is open.
        let _silent = TcpStream::connect(addr).unwrap();
        assert_eq!(get_status(addr), "HTTP/1.1 200 OK");
        report
    })
    .await
    .unwrap();
    for (what, closed, in_time) in report {
        assert!(
            closed && in_time,
            "{what}: closed {closed}, in time {in_time}"
        );
    }
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server ends after its shutdown signal")
        .unwrap()
        .unwrap();
}

/// The API client closes idle connections before the server would: a request never goes out
/// on a connection the server is closing.
#[test]
fn clients_close_idle_connections_before_the_server_does() {
    assert!(fairsched_api::client::POOL_IDLE_TIMEOUT < fairsched_server::http::HEADER_READ_TIMEOUT);
}
