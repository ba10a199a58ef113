//! Servers sharing a PostgreSQL store: one leads, the others stand by.
//!
//! A server opens the store and listens at once, as a standby ([`standby`]): it answers
//! every request with [`fairsched_api::codes::NOT_LEADER`] naming the leader's URL, and tries
//! to be elected every fifth of the lease (the store's `leader` row, fenced by epoch: see
//! `fairsched_store::PostgresStore::acquire_leadership`). Once elected it starts renewing the
//! lease ([`lease`]), loads the state as a restart does ([`crate::actor::Actor::new`]:
//! recovery, nodes restored, running jobs adopted), and the same listener serves the API from
//! then on (one router whose handler switches; no gap, no rebinding). Its store writes only
//! while it holds the epoch it was elected for. When the leadership is lost (a renewal
//! refused or none for most of the lease, or a commit refused with `NotLeader`) the process
//! exits at once with [`LOST_LEADERSHIP_EXIT_CODE`]; it never goes on serving (a supervisor
//! restarts it, as a standby).

mod lease;
mod standby;

use crate::http::{self, AppState, Failure};
use crate::{LOST_LEADERSHIP, ServerConfig};
use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse as _, Response};
use fairsched_store::PostgresStore;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tokio::sync::{mpsc, watch};
use tower::ServiceExt as _;

/// The exit status of a server that lost the leadership (EX_TEMPFAIL).
pub const LOST_LEADERSHIP_EXIT_CODE: i32 = 75;

/// A server with a PostgreSQL store, bound, not yet elected.
#[derive(Debug)]
pub(crate) struct Standby {
    pub store: PostgresStore,
    pub config: ServerConfig,
    /// What it calls itself in the store (its `advertise_url`).
    pub advertised: String,
}

/// Logs why and ends the process now: a server that is no longer the leader must not serve
/// another request (nor wait for its actor or store to wind down).
fn exit_lost(why: &str) -> ! {
    tracing::error!(
        "{LOST_LEADERSHIP}: {why}; it stops serving and exits (restarted, it stands by)"
    );
    std::process::exit(LOST_LEADERSHIP_EXIT_CODE)
}

/// A fingerprint (SHA-256, hex) of what a server takes agents and users by: its agent token
/// and its users' names and tokens. Servers of one cluster must have the same.
fn credentials_fingerprint(config: &ServerConfig) -> anyhow::Result<String> {
    use sha2::{Digest, Sha256};
    let mut users: Vec<(String, Vec<u8>)> = config
        .users(false)?
        .into_iter()
        .map(|(token, who)| (who.name.clone(), token))
        .collect();
    users.sort();
    let mut h = Sha256::new();
    h.update(b"fairsched credentials 1\0");
    h.update(config.agent_token.as_deref().unwrap_or_default().as_bytes());
    for (name, token) in users {
        h.update([0]);
        h.update(name.as_bytes());
        h.update([0]);
        h.update(&token);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// `f` on the store, off the async runtime.
async fn blocking<T: Send + 'static>(
    mut store: PostgresStore,
    f: impl FnOnce(&mut PostgresStore) -> T + Send + 'static,
) -> anyhow::Result<(PostgresStore, T)> {
    tokio::task::spawn_blocking(move || {
        let r = f(&mut store);
        (store, r)
    })
    .await
    .map_err(|e| anyhow::anyhow!("the store's task failed: {e}"))
}

/// Stands by until elected, then serves as the leader until `shutdown` resolves (then the
/// lease is released) or the leadership is lost (then the process exits).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    standby: Standby,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let Standby {
        mut store,
        config,
        advertised,
    } = standby;
    let auth = crate::auth::Auth::from_config(&config)?;
    let fingerprint = credentials_fingerprint(&config)?;
    let lease = config.store.lease();
    let known = standby::Known::default();
    // The leader's router, state and lease, once elected.
    let slot: Arc<OnceLock<Leading>> = Arc::default();
    let app = {
        let slot = slot.clone();
        let guard = standby::Guard {
            auth: Arc::new(auth.clone()),
            agent_token: config.agent_token.clone(),
        };
        let standby = standby::router(known.clone(), guard);
        Router::new().fallback(move |req: Request| {
            let leading = slot.get().map(|l| (l.router.clone(), l.lease.clone()));
            let standby = standby.clone();
            async move {
                let Some((router, lease)) = leading else {
                    return answer(standby, req).await;
                };
                // A lease that no longer holds (this process was paused, or cut off from the
                // database): nothing is answered, before or after the request is handled.
                let refused = || Failure(standby::not_leader(None)).into_response();
                if !lease.holds() {
                    return refused();
                }
                let response = answer(router, req).await;
                if !lease.holds() {
                    return refused();
                }
                response
            }
        })
    };
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let serving = {
        let slot = slot.clone();
        crate::http::serve(listener, app, async move {
            let _ = stop_rx.wait_for(|s| *s).await;
            // Live event streams would keep their connections open forever.
            if let Some(leading) = slot.get() {
                leading.state.stop_streams();
            }
        })
    };
    let mut serving = tokio::spawn(serving);
    tokio::pin!(shutdown);

    // Standing by.
    let mut last_error: Option<String> = None;
    let mut last_leader: Option<Option<String>> = None;
    // The leader's credentials' fingerprint last seen to differ from this server's.
    let mut differs: Option<String> = None;
    let (epoch, since) = loop {
        let sent = Instant::now();
        let holder = advertised.clone();
        let (s, (acquired, leader, theirs)) = blocking(store, move |s| {
            let acquired = s.acquire_leadership(&holder, lease);
            let (leader, theirs) = match &acquired {
                Ok(None) => (Some(s.leader()), s.credentials_fingerprint().ok().flatten()),
                _ => (None, None),
            };
            (acquired, leader, theirs)
        })
        .await?;
        store = s;
        match (acquired, leader) {
            (Ok(Some(epoch)), _) => break (epoch, sent),
            (Ok(None), Some(Ok(l))) => {
                let leader =
                    (l.expires_in_ms > 0 && !l.holder.is_empty() && l.holder != advertised)
                        .then_some(l.holder);
                if let Some(url) = &leader
                    && theirs.as_ref().is_some_and(|t| *t != fingerprint)
                    && differs != theirs
                {
                    tracing::error!(
                        leader = url.as_str(),
                        "this server's agent_token or [auth] users' tokens differ from those \
                         of the leader {url}: if this server takes over, it refuses every agent \
                         (their jobs are killed when their leases run out) and those users; \
                         give every server of the cluster the same agent_token and [auth]"
                    );
                    differs = theirs.clone();
                }
                if last_leader.as_ref() != Some(&leader) {
                    match &leader {
                        Some(url) => tracing::info!(
                            leader = url.as_str(),
                            epoch = l.epoch,
                            "standing by: {url} leads"
                        ),
                        None => tracing::info!("standing by: waiting for the lease to run out"),
                    }
                    last_leader = Some(leader.clone());
                }
                known.set(leader);
                last_error = None;
            }
            (Err(e), _) | (Ok(None), Some(Err(e))) => {
                let e = e.to_string();
                if last_error.as_ref() != Some(&e) {
                    tracing::warn!("standing by: cannot reach the store: {e}");
                    last_error = Some(e);
                }
                known.set(None);
            }
            (Ok(None), None) => {}
        }
        tokio::select! {
            _ = &mut shutdown => {
                stop_tx.send_replace(true);
                return served(serving.await);
            }
            ended = &mut serving => return served(ended),
            _ = tokio::time::sleep(lease / 5) => {}
        }
    };

    // Elected: keep the lease first (loading the state may take a while), then load.
    tracing::info!(
        epoch,
        url = advertised.as_str(),
        "elected leader; loading the state"
    );
    // For the standbys to compare theirs with.
    let (s, written) =
        blocking(store, move |s| s.set_credentials_fingerprint(&fingerprint)).await?;
    store = s;
    if let Err(e) = written {
        tracing::warn!("cannot write this server's credentials' fingerprint to the store: {e}");
    }
    // While it loads, the standby's routes answer that no server leads yet (not the one
    // that led before, which is gone).
    known.set(None);
    let (store, renewing) = blocking(store, |s| s.connect_again()).await?;
    let mut keeper = lease::keep(renewing?, lease, since)?;
    let loading = Instant::now();
    let store = tokio::select! {
        biased;
        why = keeper.lost() => exit_lost(&why),
        loaded = recover(store, config.clone()) => loaded?,
        // Stopped while it loads: it lets go of the lease (what the load commits is fenced:
        // refused once another server is elected).
        _ = &mut shutdown => {
            stop_tx.send_replace(true);
            let served = served(serving.await);
            keeper.release().await;
            return served;
        }
    };
    let (actor, view) = store;
    let (tx, rx) = mpsc::channel(1024);
    let state = AppState::new(tx, view, config.agent_token.clone(), &actor).with_auth(auth);
    let _ = slot.set(Leading {
        router: http::router(state.clone()),
        state,
        lease: keeper.validity(),
    });
    let mut actor = tokio::spawn(actor.run(rx));
    tracing::info!(
        epoch,
        loaded_ms = loading.elapsed().as_millis() as u64,
        "leading: serving the API"
    );
    tokio::select! {
        biased;
        why = keeper.lost() => exit_lost(&why),
        ended = &mut actor => {
            let e = match ended {
                Ok(Ok(())) => anyhow::anyhow!("the scheduler's actor stopped"),
                Ok(Err(e)) => e,
                Err(e) => crate::actor_died(e),
            };
            if let Some(why) = lost_in(&e) {
                exit_lost(&why);
            }
            tracing::error!("{e:#}; the server exits");
            Err(e)
        }
        _ = &mut shutdown => {
            stop_tx.send_replace(true);
            let served = served(serving.await);
            // The router (and with it every command sender) is gone: the actor ends, after
            // committing what it answered; then the lease is released.
            drop(slot);
            let ended = actor.await.map_err(crate::actor_died).and_then(|r| r);
            if let Some(why) = ended.as_ref().err().and_then(lost_in) {
                exit_lost(&why);
            }
            keeper.release().await;
            served.and(ended)
        }
        ended = &mut serving => served(ended),
    }
}

/// The state loaded from the store as a restart loads it.
async fn recover(
    store: PostgresStore,
    config: ServerConfig,
) -> anyhow::Result<(crate::actor::Actor, watch::Receiver<Arc<crate::view::View>>)> {
    tokio::task::spawn_blocking(move || crate::actor::Actor::new(&config, Box::new(store)))
        .await
        .map_err(|e| anyhow::anyhow!("loading the state failed: {e}"))?
}

fn served(r: Result<std::io::Result<()>, tokio::task::JoinError>) -> anyhow::Result<()> {
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(anyhow::anyhow!("the server stopped serving: {e}")),
        Err(e) => Err(anyhow::anyhow!("the server's listener task failed: {e}")),
    }
}

/// What serves once the server leads.
struct Leading {
    router: Router,
    state: AppState,
    lease: lease::Validity,
}

/// `router`'s response to `req`.
async fn answer(router: Router, req: Request) -> Response {
    let r: Result<Response, std::convert::Infallible> = router.oneshot(req).await;
    match r {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// Why the actor stopped, when it stopped because the store said another server leads.
fn lost_in(e: &anyhow::Error) -> Option<String> {
    let text = e.to_string();
    let why = text.strip_prefix(LOST_LEADERSHIP)?;
    Some(why.trim_start_matches(": ").to_string())
}
