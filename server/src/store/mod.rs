//! The request history scripts and the UI read: `GET /api/metrics/activity`
//! and `GET /api/metrics/stats`.
//!
//! | file | concern |
//! |---|---|
//! | `mod` | [`History`]: where finished rows are kept (`Activity::page` and `Activity::stats` query it) |
//! | `row` | [`Finished`]: one finished request, as kept and as the API shows it |
//! | `query` | [`ActivityQuery`]: llama-swap's parameters, their errors, paging rows in memory |
//! | `stats` | [`ActivityStats`]: totals and speed histograms |
//! | `sqlite` | [`Sqlite`]: the database at `store.path`, its writer thread and migrations |
//!
//! Without `store.path` the history is the activity ring (`metricsMaxInMemory`
//! rows, [`crate::activity::Activity`]); with it, every finished row also goes
//! to the database, which keeps it across restarts and reloads within its
//! [`Retention`]. A reload applies a changed `metricsMaxInMemory` and
//! `store.path` ([`crate::activity::Activity::reconfigure`]; the old database
//! is closed), and a changed `store.maxRows` or `store.maxAge`
//! ([`History::set_retention`]).

mod query;
mod row;
mod sqlite;
mod stats;

use std::path::PathBuf;
use std::sync::Arc;

pub(crate) use query::{ActivityQuery, Page, QueryError};
pub(crate) use row::Finished;
pub use sqlite::Retention;
pub(crate) use sqlite::{MIGRATIONS, Sqlite};
pub(crate) use stats::{ActivityStats, StatsBuilder};

/// Rows a database keeps by default: about 300 MB of history.
pub(crate) const DEFAULT_MAX_ROWS: u64 = 1_000_000;

/// Where the history goes, from the configuration (`store.path`,
/// `store.maxRows`, `store.maxAge`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// The database file; `None` keeps the history in memory only.
    pub path: Option<PathBuf>,
    /// How much the database keeps.
    pub retention: Retention,
}

impl Default for StoreSettings {
    fn default() -> Self {
        Self {
            path: None,
            retention: Retention {
                max_rows: DEFAULT_MAX_ROWS,
                max_age: None,
            },
        }
    }
}

/// Why the history database cannot be used; every variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The file cannot be opened or read as an SQLite database.
    #[error("store.path {}: cannot open the history database: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// The file is an SQLite database of something else.
    #[error("store.path {}: not a llama-swap-server history database: {why}", path.display())]
    NotOurs {
        /// The file.
        path: PathBuf,
        /// What it seems to be.
        why: String,
    },
    /// A newer version of this server changed the schema.
    #[error(
        "store.path {}: written by a newer llama-swap-server (schema {version}, this one knows {})",
        path.display(),
        MIGRATIONS.len()
    )]
    Newer {
        /// The file.
        path: PathBuf,
        /// Its schema version.
        version: i64,
    },
    /// The file cannot use write-ahead logging (a network file system?).
    #[error("store.path {}: cannot use WAL journaling (got {mode:?})", path.display())]
    Wal {
        /// The file.
        path: PathBuf,
        /// The journal mode SQLite kept.
        mode: String,
    },
    /// The writer thread could not be started.
    #[error("store.path {}: cannot start the history writer: {source}", path.display())]
    Thread {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A query failed.
    #[error("the history database could not be read: {0}")]
    Query(rusqlite::Error),
    /// The database was closed (a reload changed `store.path`, or the server
    /// is stopping).
    #[error("store.path {}: the history database was closed", path.display())]
    Closed {
        /// The file.
        path: PathBuf,
    },
}

/// The history of finished requests: the in-memory ring, and the database
/// when there is one. Opened when the server starts (a bad `store.path` is a
/// start error) and kept across reloads that keep `store.path`; give it to
/// the server with [`HttpOptions::history`](crate::HttpOptions::history). A
/// reload that changes `store.path` opens the new file (one that cannot be
/// used refuses the reload), sends the rows there from then on and closes
/// the old one.
#[derive(Debug)]
pub struct History {
    db: Option<Arc<Sqlite>>,
}

impl History {
    /// Opens the database `settings` names, if any.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] naming the path when the file cannot be opened or created, is not
    /// a database of ours (llama-swap's own, another program's, or a newer schema), or its
    /// migrations fail.
    pub fn open(settings: &StoreSettings) -> Result<Self, StoreError> {
        let db = match &settings.path {
            Some(path) => Some(Arc::new(Sqlite::open(path, settings.retention.clone())?)),
            None => None,
        };
        Ok(Self { db })
    }

    /// A history kept in memory only.
    pub fn in_memory() -> Self {
        Self { db: None }
    }

    /// The database, when the history is kept in one.
    pub(crate) fn database(&self) -> Option<&Arc<Sqlite>> {
        self.db.as_ref()
    }

    /// The first id of this run: one past the last one the database kept.
    pub fn next_id(&self) -> u64 {
        self.db.as_ref().map_or(1, |db| db.next_id())
    }

    /// The time of the last row the database kept when it was opened (ms
    /// since the epoch; 0 without one): rows that follow are not recorded
    /// before it, so times rise with the ids.
    pub fn last_ms(&self) -> u64 {
        self.db.as_ref().map_or(0, |db| db.last_ms())
    }

    /// Writes what is waiting, stops the database's writer and closes the
    /// file (a reload that changes `store.path` closes the old one).
    pub fn close(&self) {
        if let Some(db) = &self.db {
            db.close();
        }
    }

    /// Keeps `retention` from now on (a reload that changes `store.maxRows`
    /// or `store.maxAge`): the rows handed over before are written, then
    /// what the new bounds exclude is deleted. Blocks until then, or for
    /// `wait` at most (false: the deletion goes on in the background; also
    /// false without a database or once closed). Call it off the runtime.
    pub fn set_retention(&self, retention: Retention, wait: std::time::Duration) -> bool {
        self.db
            .as_ref()
            .is_some_and(|db| db.set_retention(retention, wait))
    }
}

#[cfg(test)]
mod tests;
