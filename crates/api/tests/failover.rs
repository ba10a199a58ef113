//! A client given several servers goes to the leader: past servers it cannot reach, and past
//! standbys (`NOT_LEADER`), to the one a standby names or the next. Each case runs against
//! small HTTP servers on 127.0.0.1 that answer every request the same way.
#![cfg(feature = "client")]

use axum::http::StatusCode;
use fairsched_api::client::ApiClient;
use fairsched_api::codes;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How a fake server answers.
#[derive(Clone)]
enum Role {
    /// The leader: an empty list.
    Leader,
    /// A standby, naming the leader's URL (of the server at that index) or none.
    Standby(Option<usize>),
    /// An error that is not about leadership.
    Refuses,
    /// Nothing listens there.
    Down,
}

struct Fake {
    url: String,
    hits: Arc<AtomicUsize>,
}

/// Starts one server per role (`Down`: a port just closed); their URLs and hit counters.
async fn servers(roles: &[Role]) -> Vec<Fake> {
    let mut listeners = Vec::new();
    for _ in roles {
        listeners.push(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
    }
    let urls: Vec<String> = listeners
        .iter()
        .map(|l| format!("http://{}", l.local_addr().unwrap()))
        .collect();
    let mut fakes = Vec::new();
    for ((listener, role), url) in listeners.into_iter().zip(roles).zip(&urls) {
        let hits = Arc::new(AtomicUsize::new(0));
        if matches!(role, Role::Down) {
            drop(listener);
        } else {
            let (status, body): (StatusCode, Value) = match role {
                Role::Leader => (StatusCode::OK, json!([])),
                Role::Standby(leader) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    json!({"code": codes::NOT_LEADER, "message": format!("{url} is a standby"),
                           "attributes": leader.map_or(json!({}), |l| json!({"leader": urls[l]}))}),
                ),
                Role::Refuses => (
                    StatusCode::BAD_REQUEST,
                    json!({"code": codes::BAD_REQUEST, "message": "bad request body: nope",
                           "attributes": {}}),
                ),
                Role::Down => unreachable!(),
            };
            let counted = hits.clone();
            let app = axum::Router::new().fallback(move || {
                let body = body.clone();
                counted.fetch_add(1, Ordering::Relaxed);
                async move { (status, axum::Json(body)) }
            });
            tokio::spawn(async move { axum::serve(listener, app).await });
        }
        fakes.push(Fake {
            url: url.clone(),
            hits,
        });
    }
    fakes
}

/// What a request through a client of `given` (indexes into the fakes) gets: the index of
/// the server that answered it last (the client's `base`), or the error's code and message.
async fn request(fakes: &[Fake], given: &[usize]) -> Result<usize, (u32, String)> {
    let list: Vec<&str> = given.iter().map(|&i| fakes[i].url.as_str()).collect();
    let client = ApiClient::new(&list.join(","), None);
    match client.list_nodes().await {
        Ok(_) => Ok(fakes.iter().position(|f| f.url == client.base()).unwrap()),
        Err(e) => Err((e.code().unwrap_or(0), e.to_string())),
    }
}

#[tokio::test]
async fn requests_go_to_the_leader() {
    use Role::*;
    // (servers, the ones the client is given, the server that answers, or the error's code
    // and words in its message)
    type Expected = Result<usize, (u32, &'static [&'static str])>;
    let cases: Vec<(Vec<Role>, Vec<usize>, Expected)> = vec![
        (vec![Leader], vec![0], Ok(0)),
        (vec![Down, Leader], vec![0, 1], Ok(1)),
        (vec![Standby(Some(1)), Leader], vec![0, 1], Ok(1)),
        (vec![Standby(None), Leader], vec![0, 1], Ok(1)),
        // A leader the client was not given, named by the standby it was.
        (vec![Standby(Some(1)), Leader], vec![0], Ok(1)),
        (vec![Down, Standby(Some(2)), Leader], vec![0, 1], Ok(2)),
        (
            vec![Standby(None), Standby(None)],
            vec![0, 1],
            Err((
                codes::NOT_LEADER,
                &["no leader among the servers", "is not the leader"],
            )),
        ),
        (
            vec![Standby(None)],
            vec![0],
            Err((codes::NOT_LEADER, &["is a standby"])),
        ),
        (
            vec![Down, Standby(None)],
            vec![0, 1],
            Err((
                codes::NOT_LEADER,
                &["cannot be reached", "is not the leader"],
            )),
        ),
        // Another error is the answer: the request is not sent elsewhere.
        (
            vec![Refuses, Leader],
            vec![0, 1],
            Err((codes::BAD_REQUEST, &["nope"])),
        ),
    ];
    for (roles, given, expected) in cases {
        let fakes = servers(&roles).await;
        let got = request(&fakes, &given).await;
        let label = format!("{:?} given {given:?}", roles.len());
        match (&got, &expected) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{label}"),
            (Err((code, message)), Err((want, words))) => {
                assert_eq!(code, want, "{label}: {message}");
                for w in *words {
                    assert!(message.contains(w), "{label}: {message}");
                }
            }
            _ => panic!("{label}: got {got:?}"),
        }
        if matches!(roles[0], Refuses) {
            assert_eq!(fakes[1].hits.load(Ordering::Relaxed), 0, "{label}");
        }
    }
}

/// Once the leader answered, the next requests go to it first.
#[tokio::test]
async fn the_leader_that_answered_is_asked_first() {
    let fakes = servers(&[Role::Standby(Some(1)), Role::Leader]).await;
    let client = ApiClient::new(&format!("{},{}", fakes[0].url, fakes[1].url), None);
    client.list_nodes().await.unwrap();
    client.list_nodes().await.unwrap();
    client.list_nodes().await.unwrap();
    assert_eq!(fakes[0].hits.load(Ordering::Relaxed), 1);
    assert_eq!(fakes[1].hits.load(Ordering::Relaxed), 3);
    assert_eq!(client.base(), fakes[1].url);
}

/// A server that takes connections but never answers (a paused or cut-off leader): the
/// request that timed out there is not sent again (it may have been done), but the next
/// request goes to the next server, which leads now or names the leader, instead of waiting
/// for the silent one again (an agent's heartbeats would miss the new leader until its
/// node timed out).
#[tokio::test]
async fn after_a_timeout_the_next_request_goes_to_the_next_server() {
    let fakes = servers(&[Role::Standby(Some(1)), Role::Leader]).await;
    // Nobody accepts from this listener's queue: connections open, requests hang.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let client = ApiClient::with_timeout(
        &format!("{silent_url},{},{}", fakes[0].url, fakes[1].url),
        None,
        std::time::Duration::from_millis(300),
    );
    let e = client.list_nodes().await.unwrap_err();
    assert!(
        e.to_string().contains("timed out") || e.to_string().contains("time"),
        "{e}"
    );
    assert_eq!(fakes[0].hits.load(Ordering::Relaxed), 0, "not sent again");
    assert_eq!(fakes[1].hits.load(Ordering::Relaxed), 0, "not sent again");
    client.list_nodes().await.unwrap();
    assert_eq!(client.base(), fakes[1].url);
    drop(silent);
}
