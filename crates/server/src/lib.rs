//! The fairsched scheduler server.
//!
//! * One task ([`actor::Actor`]) owns the scheduling core; HTTP handlers talk to it by message
//!   and read a published snapshot ([`view::View`]).
//! * A timer calls the core's `tick` (fair-share update, hang checks) every
//!   `fair_share_update_period_ms` and removes nodes that stopped heartbeating.
//! * Every accepted change is committed to the store before the reply; at start the stored
//!   pool trees win over the configured ones, which only add the trees the store lacks
//!   (`start_trees`); the store's unfinished operations are submitted again and their running
//!   jobs adopted on their nodes (restored with the operator's settings; the node's next
//!   heartbeat reconciles them, a node that does not come back within `node_timeout_ms` loses
//!   them to pending).
//! * With users in `[auth]`, requests carry a user's token ([`auth`]): the handlers name the
//!   caller, the actor checks the pools' ACLs before a command changes anything.
//! * With `[store] url` (PostgreSQL) several servers share one store: one is elected leader
//!   and serves as above, the others stand by and name it to clients (`ha`); a leader that
//!   loses the leadership exits.
//! * Time given to the core: milliseconds since the server started (monotonic).

pub mod actor;
/// The name of the thread that commits to the store (see `actor::writer`).
pub const STORE_WRITER_THREAD: &str = "store-writer";
pub mod auth;
pub mod caller;
pub mod command;
pub mod config;
mod ha;
pub mod http;
pub mod jobs;
pub mod live;
pub mod metrics;
pub mod reference;
mod start_trees;
pub mod submit;
pub mod validate;
pub mod view;

pub use ha::LOST_LEADERSHIP_EXIT_CODE;

/// How the error of an actor stopped by a write the store refused (another server was
/// elected leader) starts; the server then exits with [`LOST_LEADERSHIP_EXIT_CODE`].
pub const LOST_LEADERSHIP: &str = "this server lost the leadership";

pub use config::{AuthConfig, AuthUser, ServerConfig, StoreConfig, Synchronous};

use std::future::Future;
use std::net::SocketAddr;
use tokio::sync::mpsc;

/// A server bound to its address, not yet serving.
#[derive(Debug)]
pub struct Server {
    listener: tokio::net::TcpListener,
    mode: Mode,
}

#[derive(Debug)]
enum Mode {
    /// Its own store (SQLite, or one given to [`Server::bind_with_store`]), loaded.
    Ready(Box<Ready>),
    /// A PostgreSQL store shared with other servers: elected first (see `ha`).
    Standby(Box<ha::Standby>),
}

#[derive(Debug)]
struct Ready {
    actor: actor::Actor,
    state: http::AppState,
    rx: mpsc::Receiver<command::Request>,
}

impl Server {
    /// Opens the store, restores state and binds the listen address. With `[store] url`, opens
    /// the PostgreSQL store and binds as a standby: the state is loaded once this server is
    /// elected leader, in [`Server::serve`].
    pub async fn bind(config: &ServerConfig) -> anyhow::Result<Server> {
        if let Some(url) = &config.store.url {
            return Server::bind_postgres(config, url).await;
        }
        let store = fairsched_store::SqliteStore::open_with(
            &config.data_dir,
            config.store.synchronous.store(),
        )?;
        Server::bind_with_store(config, Box::new(store)).await
    }

    /// [`Server::bind`] on `store` instead of the SQLite store in `config.data_dir`.
    pub async fn bind_with_store(
        config: &ServerConfig,
        store: Box<dyn fairsched_store::Store>,
    ) -> anyhow::Result<Server> {
        let auth = auth::Auth::from_config(config)?;
        let (actor, view) = actor::Actor::new(config, store)?;
        let listener = tokio::net::TcpListener::bind(&config.listen)
            .await
            .map_err(|e| anyhow::anyhow!("listen: cannot listen on {}: {e}", config.listen))?;
        let (tx, rx) = mpsc::channel(1024);
        let state =
            http::AppState::new(tx, view, config.agent_token.clone(), &actor).with_auth(auth);
        Ok(Server {
            listener,
            mode: Mode::Ready(Box::new(Ready { actor, state, rx })),
        })
    }

    /// [`Server::bind`] with a PostgreSQL store: opened (its schema created or migrated),
    /// and the listen address bound; not elected yet.
    async fn bind_postgres(config: &ServerConfig, url: &str) -> anyhow::Result<Server> {
        config.validate()?;
        auth::Auth::from_config(config)?;
        let url = url.to_string();
        let store = tokio::task::spawn_blocking(move || fairsched_store::PostgresStore::open(&url))
            .await
            .map_err(|e| anyhow::anyhow!("opening the store failed: {e}"))??;
        let listener = tokio::net::TcpListener::bind(&config.listen)
            .await
            .map_err(|e| anyhow::anyhow!("listen: cannot listen on {}: {e}", config.listen))?;
        let advertised = config.advertised(listener.local_addr()?);
        Ok(Server {
            listener,
            mode: Mode::Standby(Box::new(ha::Standby {
                store,
                config: config.clone(),
                advertised,
            })),
        })
    }

    /// Whether `data_dir` holds a store already: a server started there before, and its
    /// stored pool trees win over the configured ones (see `ServerConfig::pool_trees_file`).
    pub fn store_exists(data_dir: &std::path::Path) -> bool {
        fairsched_store::SqliteStore::exists(data_dir)
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves, then stops accepting, finishes the open requests and
    /// stops the actor.
    ///
    /// With a PostgreSQL store it stands by until elected leader, then loads the state and
    /// serves on the same listener; a server that loses the leadership exits the process
    /// with [`LOST_LEADERSHIP_EXIT_CODE`].
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let Ready { actor, state, rx } = match self.mode {
            Mode::Ready(ready) => *ready,
            Mode::Standby(standby) => return ha::serve(self.listener, *standby, shutdown).await,
        };
        let mut actor = tokio::spawn(actor.run(rx));
        let app = http::router(state.clone());
        let serving = http::serve(self.listener, app, async move {
            shutdown.await;
            // Live event streams would keep their connections open forever.
            state.stop_streams();
        });
        tokio::select! {
            served = serving => {
                served?;
                // The router (and with it every command sender) is gone: the actor ends.
                actor.await.map_err(actor_died)?
            }
            // The actor stopped while the server serves: a panic, or a state it cannot go
            // on from. Serving reads of a frozen state would hide it: the server exits with
            // the error, for a supervisor to restart it.
            ended = &mut actor => {
                let e = match ended {
                    Ok(Ok(())) => anyhow::anyhow!("the scheduler's actor stopped"),
                    Ok(Err(e)) => e,
                    Err(e) => actor_died(e),
                };
                tracing::error!("{e:#}; the server exits");
                Err(e)
            }
        }
    }
}

/// What `fairsched config check` reports of a valid server file.
#[derive(Debug)]
pub struct ConfigSummary {
    /// Every pool tree the file configures, with its pool count (the default tree first);
    /// empty when it configures none (a new store then runs one `default` tree).
    pub trees: Vec<(String, usize)>,
    /// Where the trees come from (`the pool-trees file ...`, `the inline pool_trees`).
    pub trees_source: Option<String>,
    /// `[auth]` users (0: authentication off).
    pub users: usize,
    /// Warnings of the pool trees' validation.
    pub warnings: Vec<String>,
}

/// Checks a server's file as `fairsched server` would at start, without opening its store or
/// its port: the file itself (unknown options, `[auth]`, token files), the pool trees it
/// configures (`pool_trees_file` read, validated as a whole) and the scheduler's settings with
/// them. A store's own trees win over configured ones at later starts; they are not read here.
pub fn check_config(config: &ServerConfig) -> anyhow::Result<ConfigSummary> {
    config.validate()?;
    let auth = auth::Auth::from_config(config)?;
    let configured = start_trees::configured(config)?;
    let (trees, source) = match configured {
        Some((trees, source)) => (trees, Some(source)),
        None => (
            fairsched_config::PoolTrees::single("default", Default::default()),
            None,
        ),
    };
    let validated = fairsched_config::validate_pool_trees(&trees)
        .map_err(|e| anyhow::anyhow!("pool trees: {e}"))?;
    let warnings = validated.warnings.iter().map(|w| w.to_string()).collect();
    let mut summary: Vec<(String, usize)> = validated
        .trees
        .iter()
        .map(|(name, t)| (name.clone(), t.pools.len()))
        .collect();
    if let Some(default) = &validated.default_tree {
        summary.sort_by_key(|(name, _)| name != default);
    }
    fairsched_core::Scheduler::new(config.scheduler.clone(), validated)
        .map_err(|e| anyhow::anyhow!("scheduler: {e}"))?;
    Ok(ConfigSummary {
        trees: if source.is_some() {
            summary
        } else {
            Vec::new()
        },
        trees_source: source,
        users: auth.user_count(),
        warnings,
    })
}

/// The error of an actor task that panicked (the panic's message, when it has one).
pub(crate) fn actor_died(e: tokio::task::JoinError) -> anyhow::Error {
    if e.is_panic() {
        let panic = e.into_panic();
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "(no message)".into());
        anyhow::anyhow!("the scheduler's actor panicked: {message}")
    } else {
        anyhow::anyhow!("the scheduler's actor was cancelled")
    }
}
