//! Leader election and fencing in the database: the `leader` table's one row holds the epoch
//! (the number of elections so far), the holder and when its lease expires, by the database's
//! clock (`now()`), so that servers' clocks do not matter.
//!
//! A server elected for epoch E writes only while the row still says E: every write's
//! transaction first reads the row `FOR SHARE` ([`check_epoch`]), which also holds off an
//! election until that transaction ends. So a deposed leader's late writes are refused by the
//! database ([`StoreError::NotLeader`]), and everything a leader committed precedes the next
//! election, whose leader loads it.

use super::conn::Session;
use super::{PostgresStore, lock};
use crate::StoreError;
use std::time::Duration;

/// Who leads the servers sharing a store, as the store has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    /// The number of elections so far (0: none yet).
    pub epoch: u64,
    /// What the leader said it is (`""`: none yet).
    pub holder: String,
    /// How long its lease runs on (0: it expired; another server may be elected).
    pub expires_in_ms: u64,
}

/// Refuses the transaction unless the store is at `epoch`; holds the leader row until the
/// transaction ends.
pub(super) fn check_epoch(s: &mut Session, epoch: u64) -> Result<(), StoreError> {
    let current: i64 = s
        .query_opt("SELECT epoch FROM leader FOR SHARE", &[])?
        .map_or(0, |r| r.get(0));
    let current = current.max(0) as u64;
    if current != epoch {
        return Err(StoreError::NotLeader { epoch, current });
    }
    Ok(())
}

fn millis(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

impl PostgresStore {
    /// Becomes the leader if no lease runs (none was taken, or the last one expired by the
    /// database's clock): the store's epoch goes one up and is held by `holder` for `lease`.
    /// Returns the new epoch, or `None` while another lease runs (also this store's own: renew
    /// that one). From then on every write of this store (commit, prune, write check) is
    /// refused once the store's epoch is no longer this one.
    pub fn acquire_leadership(
        &mut self,
        holder: &str,
        lease: Duration,
    ) -> Result<Option<u64>, StoreError> {
        let lease = millis(lease);
        let epoch = lock(&self.conn).run(|s| {
            Ok(s.query_opt(
                "UPDATE leader SET epoch = epoch + 1, holder = $1,
                   expires_at = now() + $2::BIGINT * INTERVAL '1 millisecond'
                 WHERE expires_at <= now() RETURNING epoch",
                &[&holder, &lease],
            )?
            .map(|r| r.get::<_, i64>(0).max(0) as u64))
        })?;
        if epoch.is_some() {
            self.epoch = epoch;
        }
        Ok(epoch)
    }

    /// Extends this store's lease to `lease` from now; [`StoreError::NotLeader`] once another
    /// server was elected (a lease that expired with no election since is renewed: no one
    /// else wrote meanwhile).
    pub fn renew_leadership(&mut self, lease: Duration) -> Result<(), StoreError> {
        let Some(epoch) = self.epoch else {
            return Err(StoreError::Other(
                "this store was not elected leader: there is no lease to renew".into(),
            ));
        };
        let lease = millis(lease);
        let e = epoch.min(i64::MAX as u64) as i64;
        lock(&self.conn).run(|s| {
            let renewed = s.execute(
                "UPDATE leader SET expires_at = now() + $2::BIGINT * INTERVAL '1 millisecond'
                 WHERE epoch = $1",
                &[&e, &lease],
            )?;
            if renewed == 0 {
                let current: i64 = s
                    .query_opt("SELECT epoch FROM leader", &[])?
                    .map_or(0, |r| r.get(0));
                return Err(StoreError::NotLeader {
                    epoch,
                    current: current.max(0) as u64,
                });
            }
            Ok(())
        })
    }

    /// Ends this store's lease now, so that a standby is elected without waiting for it (a
    /// server that stops). Its writes stay checked against its epoch.
    pub fn release_leadership(&mut self) -> Result<(), StoreError> {
        let Some(epoch) = self.epoch else {
            return Ok(());
        };
        let e = epoch.min(i64::MAX as u64) as i64;
        lock(&self.conn).run(|s| {
            s.execute(
                "UPDATE leader SET expires_at = '-infinity' WHERE epoch = $1",
                &[&e],
            )?;
            Ok(())
        })
    }

    /// Another connection to the same store, of the same incarnation and elected for the same
    /// epoch (its writes are fenced alike), without counting an opening: for a task that
    /// renews the lease while the store itself writes.
    pub fn connect_again(&self) -> Result<PostgresStore, StoreError> {
        let target = lock(&self.conn).target().clone();
        Ok(PostgresStore {
            conn: std::sync::Mutex::new(super::conn::Conn::open(target, false)?),
            incarnation: self.incarnation,
            epoch: self.epoch,
        })
    }

    /// Tests only: a write's transaction that checks the epoch (holding the leader row, as
    /// every write does) and then waits `pause` before it goes on, as a leader frozen in the
    /// middle of a commit would; the transaction's end.
    #[cfg(feature = "testkit")]
    pub fn freeze_in_a_write(&mut self, pause: Duration) -> Result<(), StoreError> {
        self.write(|s| {
            std::thread::sleep(pause);
            s.query_opt("SELECT 1", &[])?;
            Ok(())
        })
    }

    /// Checks a store URL as [`PostgresStore::open`] reads it, without connecting.
    pub fn check_url(url: &str) -> Result<(), StoreError> {
        super::conn::Target::parse(url).map(|_| ())
    }

    /// The epoch this store was elected for (`None`: it was not).
    pub fn epoch(&self) -> Option<u64> {
        self.epoch
    }

    /// The current leader, as the store has it.
    pub fn leader(&self) -> Result<Leader, StoreError> {
        lock(&self.conn).read(|s| {
            let row = s.query_opt(
                "SELECT epoch, holder, CASE WHEN expires_at <= now() THEN 0
                   ELSE CEIL(EXTRACT(EPOCH FROM expires_at - now()) * 1000)::BIGINT END
                 FROM leader",
                &[],
            )?;
            Ok(row.map_or(
                Leader {
                    epoch: 0,
                    holder: String::new(),
                    expires_in_ms: 0,
                },
                |r| Leader {
                    epoch: r.get::<_, i64>(0).max(0) as u64,
                    holder: r.get(1),
                    expires_in_ms: r.get::<_, i64>(2).max(0) as u64,
                },
            ))
        })
    }

    /// The fingerprint of the credentials (agent token, users' tokens) the last elected
    /// server wrote ([`PostgresStore::set_credentials_fingerprint`]); `None` before any did.
    pub fn credentials_fingerprint(&self) -> Result<Option<String>, StoreError> {
        lock(&self.conn).read(|s| {
            Ok(
                s.query_opt("SELECT value FROM meta WHERE key = 'credentials'", &[])?
                    .map(|r| r.get::<_, String>(0)),
            )
        })
    }

    /// Writes this server's credentials' fingerprint, for the standbys to compare theirs
    /// with (a standby whose agents' token differs would refuse every agent once elected).
    pub fn set_credentials_fingerprint(&self, fingerprint: &str) -> Result<(), StoreError> {
        lock(&self.conn).run(|s| {
            s.execute(
                "INSERT INTO meta (key, value) VALUES ('credentials', $1)
                 ON CONFLICT (key) DO UPDATE SET value = $1",
                &[&fingerprint],
            )?;
            Ok(())
        })
    }
}
