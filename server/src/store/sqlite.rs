//! The history kept in an SQLite database at `store.path`.
//!
//! One thread owns the writing connection: rows reach it over a bounded
//! channel and are written in batches, so the request path only ever hands
//! over a pointer and never waits on the disk. Once a row arrives the writer
//! lets the rows of the next [`LINGER`] join it (up to [`MAX_BATCH`]), so a
//! busy server commits a few times per second rather than once per row, and
//! a sender rarely has to wake the writer (only a writer waiting in `recv`
//! needs waking); a query that wants the rows handed over before it wakes the
//! writer at once. Rows go in [`ROWS_PER_INSERT`] at a time (one statement
//! for many rows). A full channel (a disk
//! far slower than the traffic) drops the row; a batch the database refuses
//! is lost as a whole; both are counted ([`Counters`]) and logged. Queries
//! read through a second, read-only connection (WAL lets it read while the
//! writer writes) on a blocking thread.
//!
//! The file is ours when its `application_id` says so; a fresh file is
//! initialised; anything else is refused at start with the path named.
//! Schema changes are numbered migrations ([`MIGRATIONS`]), applied in order
//! and recorded in `user_version`.
//!
//! Retention: after every [`PRUNE_EVERY`] rows written (and at start), rows
//! beyond the newest `max_rows` and rows older than `max_age` are deleted.
//! Queries apply the bounds themselves ([`kept_from`]), so the rows waiting
//! for the next deletion are never shown: the history read is exactly what
//! the bounds keep.
//!
//! Times and ids rise together: the writer never writes a row with a time
//! before the last one's (a request that finished a millisecond earlier on
//! another thread, or a clock set back, is recorded at the last time), so
//! the `start`/`end` filters, the `time` sort and the age bound work on id
//! ranges, which the primary key finds; no index on the time is kept.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params_from_iter, types::Value};
use tokio::sync::watch;

use super::Finished;
use super::query::ActivityQuery;
use super::stats::{ActivityStats, StatsBuilder};
use super::{Page, StoreError};

/// `PRAGMA application_id` of our databases ("LSWH": llama-swap history).
pub(crate) const APPLICATION_ID: i32 = 0x4c53_5748;

/// The schema, one migration per version: migration `i` takes a database at
/// `user_version` `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE activity (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts_ms INTEGER NOT NULL,
        model TEXT NOT NULL,
        req_path TEXT NOT NULL,
        resp_content_type TEXT NOT NULL DEFAULT '',
        resp_status_code INTEGER NOT NULL,
        cache_tokens INTEGER,
        input_tokens INTEGER,
        output_tokens INTEGER,
        draft_tokens INTEGER,
        draft_acc_tokens INTEGER,
        prompt_per_second REAL,
        tokens_per_second REAL,
        duration_ms INTEGER NOT NULL,
        error_code TEXT,
        error_msg TEXT,
        request_id TEXT NOT NULL,
        seq INTEGER,
        requested_priority INTEGER NOT NULL,
        capped_priority INTEGER NOT NULL,
        effective_priority INTEGER,
        queue_ms INTEGER,
        stream INTEGER NOT NULL,
        selector TEXT,
        api_key TEXT,
        session_id TEXT
    );
    CREATE INDEX activity_ts ON activity (ts_ms);
    CREATE INDEX activity_model ON activity (model, id);
",
    "
    -- A row's time never goes back from one id to the next (the writer
    -- keeps it so), so a time range is an id range, found by a binary
    -- search on the ids ([`first_id_from`]): the index on the time only
    -- cost every insert.
    DROP INDEX activity_ts;
",
];

/// Rows written in one transaction at most.
const MAX_BATCH: usize = 1024;
/// How long the writer waits after a row arrives for more to join it.
const LINGER: Duration = Duration::from_millis(20);
/// Rows per `INSERT` statement (the rest of a batch goes one by one).
const ROWS_PER_INSERT: usize = 32;
/// Rows waiting for the writer at most; more are dropped (and counted).
const QUEUE: usize = 65_536;
/// Rows written between two retention passes.
const PRUNE_EVERY: u64 = 1000;
/// How long a query waits for rows handed over before it to be written.
const READ_YOUR_WRITES: Duration = Duration::from_secs(2);

/// How much history a database keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// The newest rows kept (0: no row-count bound).
    pub max_rows: u64,
    /// Rows older than this are deleted (`None`: no age bound).
    pub max_age: Option<Duration>,
}

/// What happened to the rows handed to the writer.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Handed over.
    pub sent: AtomicU64,
    /// Written.
    pub written: AtomicU64,
    /// Dropped because the writer was too far behind.
    pub dropped: AtomicU64,
    /// Lost in a batch the database refused.
    pub failed: AtomicU64,
}

enum Message {
    Row(Arc<Finished>),
    /// Keep this much from now on: prune at once, then say so.
    Retention(Retention, std::sync::mpsc::Sender<()>),
    /// Stop once everything before has been written.
    Close,
}

/// An open history database.
#[derive(Debug)]
pub(crate) struct Sqlite {
    path: PathBuf,
    rows: SyncSender<Message>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// The writer's thread, woken when someone waits for its rows.
    writer_thread: std::thread::Thread,
    /// The reading connection; `None` once closed.
    reader: Arc<Mutex<Option<Connection>>>,
    /// The bounds queries apply (the writer deletes by the same ones).
    retention: Mutex<Retention>,
    counters: Arc<Counters>,
    /// Rows the writer has dealt with (written, dropped or failed): a query
    /// waits for it to reach what was sent before it.
    done: watch::Receiver<u64>,
    next_id: u64,
    /// The time of the last row kept when it was opened.
    last_ms: u64,
}

impl Sqlite {
    /// Opens (or creates) the database at `path`, applies the migrations it
    /// lacks and the retention, and starts the writer.
    ///
    /// # Errors
    ///
    /// [`StoreError`] naming `path` when it cannot be opened, is not an
    /// SQLite database, belongs to something else, was written by a newer
    /// version, or cannot use WAL.
    pub(crate) fn open(path: &Path, retention: Retention) -> Result<Self, StoreError> {
        let fail = |source: rusqlite::Error| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        let mut conn = Connection::open(path).map_err(fail)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(fail)?;
        check_ours(&conn, path)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(fail)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Wal {
                path: path.to_owned(),
                mode,
            });
        }
        // Durable across a crash of the process; a power loss may lose the
        // last commits, which is what WAL's NORMAL trades for fewer syncs.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(fail)?;
        migrate(&mut conn).map_err(fail)?;
        prune(&conn, &retention).map_err(fail)?;
        let bounds = Mutex::new(retention.clone());
        let last: u64 = conn
            .query_row(
                "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'activity'), 0)",
                [],
                |r| r.get(0),
            )
            .map_err(fail)?;
        let last_ms: u64 = conn
            .query_row(
                "SELECT COALESCE((SELECT ts_ms FROM activity ORDER BY id DESC LIMIT 1), 0)",
                [],
                |r| r.get(0),
            )
            .map_err(fail)?;
        let reader = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(fail)?;
        reader.busy_timeout(Duration::from_secs(5)).map_err(fail)?;
        let (rows, inbox) = std::sync::mpsc::sync_channel(QUEUE);
        let counters = Arc::new(Counters::default());
        let (done_tx, done) = watch::channel(0);
        let writer = Writer {
            conn,
            path: path.to_owned(),
            retention,
            counters: Arc::clone(&counters),
            done: done_tx,
            since_prune: 0,
            last_ms,
            insert_many: insert_sql(ROWS_PER_INSERT),
            insert_one: insert_sql(1),
        };
        let writer = std::thread::Builder::new()
            .name("history-writer".into())
            .spawn(move || writer.run(&inbox))
            .map_err(|source| StoreError::Thread {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self {
            path: path.to_owned(),
            rows,
            writer_thread: writer.thread().clone(),
            writer: Mutex::new(Some(writer)),
            reader: Arc::new(Mutex::new(Some(reader))),
            retention: bounds,
            counters,
            done,
            next_id: last + 1,
            last_ms,
        })
    }

    /// The id the next request will get: one past the last one kept.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The time of the last row it kept when it was opened (0: none): the
    /// rows that follow are not recorded before it.
    pub(crate) fn last_ms(&self) -> u64 {
        self.last_ms
    }

    /// What happened to the rows handed over so far.
    #[cfg(test)]
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The rows handed over so far by what became of them, in the OpenMetrics
    /// text format: `llamaswap_history_rows_total{outcome}` (written, dropped
    /// because the writer was too far behind, failed in a batch the database
    /// refused). Rows still queued are in none of them.
    pub(crate) fn encode_metrics(&self) -> String {
        let c = &self.counters;
        let mut text = String::from(
            "# HELP llamaswap_history_rows Activity rows handed to the history database (store.path), by what became of them.\n\
             # TYPE llamaswap_history_rows counter\n",
        );
        for (outcome, value) in [
            ("written", &c.written),
            ("dropped", &c.dropped),
            ("failed", &c.failed),
        ] {
            let n = value.load(Ordering::Relaxed);
            text.push_str(&format!(
                "llamaswap_history_rows_total{{outcome=\"{outcome}\"}} {n}\n"
            ));
        }
        text
    }

    /// Hands `row` to the writer; never waits. A row the writer has no room
    /// for is dropped and counted.
    pub(crate) fn record(&self, row: Arc<Finished>) {
        self.counters.sent.fetch_add(1, Ordering::Relaxed);
        match self.rows.try_send(Message::Row(row)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                let dropped = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                // Logged at the first drop and then at every thousandth.
                if dropped % 1000 == 1 {
                    tracing::warn!(
                        path = %self.path.display(),
                        dropped,
                        "the history writer is behind: activity rows dropped"
                    );
                }
            }
        }
    }

    /// Waits (a bounded time) until the rows handed over before this call
    /// have been dealt with, so a query sees them.
    async fn caught_up(&self) {
        let target = self.counters.sent.load(Ordering::Relaxed);
        let dropped = || self.counters.dropped.load(Ordering::Relaxed);
        let mut done = self.done.clone();
        // The writer may be letting a batch gather: write it now.
        self.writer_thread.unpark();
        let wait = done.wait_for(|handled| handled + dropped() >= target);
        let _ = tokio::time::timeout(READ_YOUR_WRITES, wait).await;
    }

    /// Waits, without the bound a query has, until every row handed over so
    /// far has been dealt with: a test's barrier on a loaded machine, where
    /// writing thousands of rows may take longer than a query waits.
    #[cfg(test)]
    pub(crate) async fn settled(&self) {
        let target = self.counters.sent.load(Ordering::Relaxed);
        let dropped = || self.counters.dropped.load(Ordering::Relaxed);
        let mut done = self.done.clone();
        self.writer_thread.unpark();
        let _ = done.wait_for(|handled| handled + dropped() >= target).await;
    }

    /// One page of rows.
    ///
    /// # Errors
    ///
    /// [`StoreError::Query`] when the database cannot be read.
    pub(crate) async fn page(&self, query: ActivityQuery) -> Result<Page<Finished>, StoreError> {
        self.caught_up().await;
        let retention = self.retention();
        self.read(move |conn| page(conn, &query, &retention)).await
    }

    /// Totals and histograms, of `model` or of every model.
    ///
    /// # Errors
    ///
    /// [`StoreError::Query`] when the database cannot be read.
    pub(crate) async fn stats(&self, model: Option<String>) -> Result<ActivityStats, StoreError> {
        self.caught_up().await;
        let retention = self.retention();
        self.read(move |conn| stats(conn, model.as_deref(), &retention))
            .await
    }

    /// The bounds in force.
    fn retention(&self) -> Retention {
        self.retention
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `work` on the reading connection, off the runtime.
    async fn read<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let reader = Arc::clone(&self.reader);
        let path = self.path.clone();
        let run = move || {
            let conn = reader.lock().unwrap_or_else(PoisonError::into_inner);
            match conn.as_ref() {
                Some(conn) => work(conn).map_err(StoreError::Query),
                None => Err(StoreError::Closed { path }),
            }
        };
        match tokio::task::spawn_blocking(run).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Query(rusqlite::Error::InvalidQuery)),
        }
    }

    /// Keeps `retention` from now on: the writer writes the rows handed over
    /// before, deletes what the new bounds exclude, and then this returns
    /// (true), or after `wait` (false: it goes on in the background).
    /// Blocks: call it off the runtime.
    pub(crate) fn set_retention(&self, retention: Retention, wait: Duration) -> bool {
        // Queries apply the new bounds at once, whatever the deletion's pace.
        *self
            .retention
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = retention.clone();
        let (ack, applied) = std::sync::mpsc::channel();
        // A blocking send: the writer is draining, so room comes.
        if self.rows.send(Message::Retention(retention, ack)).is_err() {
            return false;
        }
        // It may be letting a batch gather.
        self.writer_thread.unpark();
        applied.recv_timeout(wait).is_ok()
    }

    /// Writes what is waiting, stops the writer and closes the database
    /// (its write-ahead log is folded in and removed). Later rows are
    /// dropped and later queries fail with [`StoreError::Closed`].
    pub(crate) fn close(&self) {
        // The reader first: the last connection to close folds the log in
        // and removes it, which a read-only one cannot.
        let reader = self
            .reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(reader);
        self.stop_writer();
    }

    fn stop_writer(&self) {
        let handle = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            // A blocking send: the writer is draining, so room comes.
            let _ = self.rows.send(Message::Close);
            handle.thread().unpark();
            if handle.join().is_err() {
                tracing::error!(path = %self.path.display(), "the history writer panicked");
            }
        }
    }
}

impl Drop for Sqlite {
    fn drop(&mut self) {
        self.close();
    }
}

/// Refuses a database that is not ours or is newer than this build.
fn check_ours(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let read = |sql: &str| -> Result<i64, StoreError> {
        conn.query_row(sql, [], |r| r.get(0))
            .map_err(|source| StoreError::Open {
                path: path.to_owned(),
                source,
            })
    };
    let application_id = read("PRAGMA application_id")?;
    let tables = read("SELECT count(*) FROM sqlite_master")?;
    if application_id == i64::from(APPLICATION_ID) {
        let version = read("PRAGMA user_version")?;
        if version > MIGRATIONS.len() as i64 {
            return Err(StoreError::Newer {
                path: path.to_owned(),
                version,
            });
        }
        return Ok(());
    }
    if application_id == 0 && tables == 0 {
        return Ok(());
    }
    let llama_swap = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE name = 'goose_db_version'",
            [],
            |_| Ok(()),
        )
        .optional()
        .ok()
        .flatten()
        .is_some();
    Err(StoreError::NotOurs {
        path: path.to_owned(),
        why: if llama_swap {
            "it is llama-swap's own activity database (its format differs); give store.path a new file".to_owned()
        } else {
            format!(
                "it holds other data (application_id {application_id:#x}, {tables} schema objects)"
            )
        },
    })
}

fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let from = usize::try_from(version).unwrap_or(0);
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(from) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
        tx.pragma_update(None, "user_version", index + 1)?;
        tx.commit()?;
    }
    Ok(())
}

fn prune(conn: &Connection, retention: &Retention) -> rusqlite::Result<usize> {
    match kept_from(conn, retention)? {
        Some(from) => conn.execute("DELETE FROM activity WHERE id < ?1", [from]),
        None => Ok(0),
    }
}

/// The lowest id `retention` keeps (`None`: it bounds nothing). Ids are
/// never reused and grow with the times: the newest `max_rows` rows are the
/// highest ids, and the rows younger than `max_age` an id range.
fn kept_from(conn: &Connection, retention: &Retention) -> rusqlite::Result<Option<u64>> {
    let mut from = None;
    if retention.max_rows > 0 {
        let last: Option<u64> = conn.query_row("SELECT MAX(id) FROM activity", [], |r| r.get(0))?;
        from = last.map(|last| (last + 1).saturating_sub(retention.max_rows));
    }
    if let Some(age) = retention.max_age {
        let cutoff = now_ms().saturating_sub(u64::try_from(age.as_millis()).unwrap_or(u64::MAX));
        let young = first_id_from(conn, cutoff, false)?;
        from = Some(from.map_or(young, |from: u64| from.max(young)));
    }
    Ok(from)
}

/// The lowest id from which every row's time is at least `ms` (`after`: later
/// than `ms`); one past the last id when none is. Times rise with the ids
/// (see the module's notes), so this is a binary search over the id range,
/// each step one lookup of the primary key.
fn first_id_from(conn: &Connection, ms: u64, after: bool) -> rusqlite::Result<u64> {
    let (min, max): (Option<u64>, Option<u64>) =
        conn.query_row("SELECT MIN(id), MAX(id) FROM activity", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    let (Some(mut low), Some(max)) = (min, max) else {
        return Ok(1);
    };
    let mut high = max + 1;
    let mut first_from =
        conn.prepare_cached("SELECT ts_ms FROM activity WHERE id >= ?1 ORDER BY id LIMIT 1")?;
    // Invariant: the answer is in low..=high; `high` (past the last id) has
    // no row, which counts as late enough.
    while low < high {
        let mid = low + (high - low) / 2;
        let ts: Option<u64> = first_from.query_row([mid], |r| r.get(0)).optional()?;
        let late_enough = ts.is_none_or(|ts| if after { ts > ms } else { ts >= ms });
        if late_enough {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    Ok(low)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// The thread that owns the writing connection.
struct Writer {
    conn: Connection,
    path: PathBuf,
    retention: Retention,
    counters: Arc<Counters>,
    done: watch::Sender<u64>,
    since_prune: u64,
    /// The time of the last row written: no row is written with an earlier one.
    last_ms: u64,
    /// The `INSERT`s of [`ROWS_PER_INSERT`] rows and of one.
    insert_many: String,
    insert_one: String,
}

impl Writer {
    fn run(mut self, inbox: &Receiver<Message>) {
        let mut batch: Vec<Arc<Finished>> = Vec::with_capacity(MAX_BATCH);
        let mut handled = 0u64;
        // The last batch was full: more rows are waiting, write on at once.
        let mut behind = false;
        loop {
            let mut closing = false;
            // New bounds, applied once the rows before them are written.
            let mut bounds = None;
            match inbox.recv() {
                Ok(Message::Row(row)) => batch.push(row),
                Ok(Message::Retention(retention, ack)) => bounds = Some((retention, ack)),
                Ok(Message::Close) | Err(_) => closing = true,
            }
            if !closing && bounds.is_none() && !behind {
                // Parked, not waiting in `recv`: the rows sent meanwhile
                // wake nobody. Woken early by a query, or by `close`.
                std::thread::park_timeout(LINGER);
            }
            while !closing && bounds.is_none() && batch.len() < MAX_BATCH {
                match inbox.try_recv() {
                    Ok(Message::Row(row)) => batch.push(row),
                    Ok(Message::Retention(retention, ack)) => bounds = Some((retention, ack)),
                    Ok(Message::Close) => closing = true,
                    Err(_) => break,
                }
            }
            behind = batch.len() >= MAX_BATCH;
            if !batch.is_empty() {
                let count = batch.len() as u64;
                match self.write(&batch) {
                    Ok(()) => {
                        self.counters.written.fetch_add(count, Ordering::Relaxed);
                        self.since_prune += count;
                    }
                    Err(error) => {
                        let failed =
                            self.counters.failed.fetch_add(count, Ordering::Relaxed) + count;
                        tracing::warn!(
                            path = %self.path.display(),
                            %error,
                            lost = count,
                            failed_so_far = failed,
                            "activity rows could not be written to the history database"
                        );
                    }
                }
                handled += count;
                batch.clear();
                self.done.send_replace(handled);
            }
            let new_bounds = bounds.map(|(retention, ack)| {
                self.retention = retention;
                ack
            });
            if self.since_prune >= PRUNE_EVERY || new_bounds.is_some() {
                self.since_prune = 0;
                if let Err(error) = prune(&self.conn, &self.retention) {
                    tracing::warn!(path = %self.path.display(), %error, "history retention failed");
                }
            }
            if let Some(ack) = new_bounds {
                let _ = ack.send(());
            }
            if closing {
                break;
            }
        }
    }

    fn write(&mut self, rows: &[Arc<Finished>]) -> rusqlite::Result<()> {
        // Each row's time: its own, or the last one's when that is later.
        let mut last = self.last_ms;
        let mut time = |row: &Finished| {
            last = last.max(row.time_ms);
            last
        };
        let tx = self.conn.transaction()?;
        {
            let mut chunks = rows.chunks_exact(ROWS_PER_INSERT);
            if rows.len() >= ROWS_PER_INSERT {
                let mut insert = tx.prepare_cached(&self.insert_many)?;
                for chunk in &mut chunks {
                    insert.execute(params_from_iter(
                        chunk.iter().flat_map(|row| values(row, time(row))),
                    ))?;
                }
            }
            let rest = chunks.remainder();
            if !rest.is_empty() {
                let mut insert = tx.prepare_cached(&self.insert_one)?;
                for row in rest {
                    insert.execute(params_from_iter(values(row, time(row))))?;
                }
            }
        }
        tx.commit()?;
        self.last_ms = last;
        Ok(())
    }
}

/// `INSERT` of `rows` rows.
fn insert_sql(rows: usize) -> String {
    let one = format!("({})", vec!["?"; INSERTED].join(", "));
    format!(
        "INSERT INTO activity ({COLUMNS}) VALUES {}",
        vec![one.as_str(); rows].join(", ")
    )
}

/// How many columns a row has ([`COLUMNS`]).
const INSERTED: usize = 26;

/// A row's values for an `INSERT`, in the order of [`COLUMNS`], its time `time_ms`.
fn values(row: &Finished, time_ms: u64) -> [rusqlite::types::ToSqlOutput<'_>; INSERTED] {
    use rusqlite::types::{ToSqlOutput, ValueRef};
    fn text(v: &str) -> ToSqlOutput<'_> {
        ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes()))
    }
    fn opt_text(v: Option<&str>) -> ToSqlOutput<'_> {
        v.map_or(ToSqlOutput::Owned(Value::Null), text)
    }
    let int = |v: u64| ToSqlOutput::Owned(Value::Integer(i64::try_from(v).unwrap_or(i64::MAX)));
    let opt_int = |v: Option<u64>| v.map_or(ToSqlOutput::Owned(Value::Null), int);
    let opt_real = |v: Option<f64>| {
        v.map_or(ToSqlOutput::Owned(Value::Null), |v| {
            ToSqlOutput::Owned(Value::Real(v))
        })
    };
    let small = |v: i32| ToSqlOutput::Owned(Value::Integer(i64::from(v)));
    [
        int(row.id),
        int(time_ms),
        text(&row.model),
        text(row.path.as_str()),
        text(row.content_type.as_deref().unwrap_or_default()),
        small(i32::from(row.status)),
        opt_int(row.cached_tokens),
        opt_int(row.prompt_tokens),
        opt_int(row.completion_tokens),
        opt_int(row.draft_tokens),
        opt_int(row.draft_accepted),
        opt_real(row.prompt_per_second),
        opt_real(row.tokens_per_second),
        int(row.duration_ms),
        opt_text(row.error.as_deref()),
        opt_text(row.error_msg.as_deref()),
        text(row.request_id.as_str()),
        opt_int(row.seq),
        small(row.requested_priority),
        small(row.capped_priority),
        row.effective_priority
            .map_or(ToSqlOutput::Owned(Value::Null), small),
        opt_int(row.queue_ms),
        small(i32::from(row.stream)),
        opt_text(row.selector.as_deref()),
        opt_text(row.api_key.as_deref()),
        opt_text(row.session_id.as_deref()),
    ]
}

/// The WHERE clause of `query`'s filters and `retention`'s bounds, and its
/// arguments (the time range becomes an id range: see [`first_id_from`]).
fn filters(
    conn: &Connection,
    query: &ActivityQuery,
    retention: &Retention,
) -> rusqlite::Result<(String, Vec<Value>)> {
    let mut clauses: Vec<String> = Vec::new();
    let mut args: Vec<Value> = Vec::new();
    let mut any_of = |column: &str, values: &[String], args: &mut Vec<Value>| {
        if values.is_empty() {
            return;
        }
        let marks = vec!["?"; values.len()].join(", ");
        clauses.push(format!("{column} IN ({marks})"));
        args.extend(values.iter().map(|v| Value::Text(v.clone())));
    };
    any_of("model", &query.models, &mut args);
    any_of("api_key", &query.keys, &mut args);
    let bound = |v: u64| Value::Integer(i64::try_from(v).unwrap_or(i64::MAX));
    let from = query
        .start_ms
        .map(|ms| first_id_from(conn, ms, false))
        .transpose()?;
    let before = query
        .end_ms
        .map(|ms| first_id_from(conn, ms, true))
        .transpose()?;
    for (column, op, value) in [
        ("id", ">=", kept_from(conn, retention)?),
        ("id", ">=", from),
        ("id", "<", before),
        ("id", ">=", query.min_id),
        ("id", "<=", query.max_id),
    ] {
        if let Some(v) = value {
            clauses.push(format!("{column} {op} ?"));
            args.push(bound(v));
        }
    }
    match query.ok {
        Some(true) => clauses.push(super::query::IS_OK_SQL.to_owned()),
        Some(false) => clauses.push(format!("NOT {}", super::query::IS_OK_SQL)),
        None => {}
    }
    if !query.priorities.is_empty() {
        let ranges: Vec<&str> = query
            .priorities
            .iter()
            .map(|_| "COALESCE(effective_priority, capped_priority) BETWEEN ? AND ?")
            .collect();
        clauses.push(format!("({})", ranges.join(" OR ")));
        for range in &query.priorities {
            args.push(Value::Integer(i64::from(*range.start())));
            args.push(Value::Integer(i64::from(*range.end())));
        }
    }
    let clause = if clauses.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", clauses.join(" AND "))
    };
    Ok((clause, args))
}

/// Every column of a row, in the order [`read_row`] and [`values`] use.
const COLUMNS: &str = "id, ts_ms, model, req_path, resp_content_type, resp_status_code,
    cache_tokens, input_tokens, output_tokens, draft_tokens, draft_acc_tokens,
    prompt_per_second, tokens_per_second, duration_ms, error_code, error_msg,
    request_id, seq, requested_priority, capped_priority, effective_priority,
    queue_ms, stream, selector, api_key, session_id";

fn page(
    conn: &Connection,
    query: &ActivityQuery,
    retention: &Retention,
) -> rusqlite::Result<Page<Finished>> {
    let (clause, args) = filters(conn, query, retention)?;
    let total: u64 = conn.query_row(
        &format!("SELECT COUNT(*) FROM activity{clause}"),
        params_from_iter(args.iter()),
        |r| r.get(0),
    )?;
    let direction = if query.ascending { "ASC" } else { "DESC" };
    let order = match query.sort.column() {
        // Times rise with the ids: the time order is the ids'.
        "id" | "ts_ms" => format!("id {direction}"),
        column => format!("{column} {direction}, id {direction}"),
    };
    let sql = format!(
        "SELECT {COLUMNS} FROM activity{clause} ORDER BY {order} LIMIT {} OFFSET {}",
        query.limit,
        query.offset()
    );
    let mut statement = conn.prepare(&sql)?;
    let rows = statement
        .query_map(params_from_iter(args.iter()), read_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Page::new(
        rows,
        query,
        usize::try_from(total).unwrap_or(usize::MAX),
    ))
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Finished> {
    let text = |i: usize| -> rusqlite::Result<Option<String>> { r.get(i) };
    Ok(Finished {
        id: r.get(0)?,
        time_ms: r.get(1)?,
        model: Arc::from(r.get::<_, String>(2)?),
        path: r.get::<_, String>(3)?.into(),
        content_type: Some(r.get::<_, String>(4)?)
            .filter(|s| !s.is_empty())
            .map(Arc::from),
        status: r.get(5)?,
        cached_tokens: r.get(6)?,
        prompt_tokens: r.get(7)?,
        completion_tokens: r.get(8)?,
        draft_tokens: r.get(9)?,
        draft_accepted: r.get(10)?,
        prompt_per_second: r.get(11)?,
        tokens_per_second: r.get(12)?,
        duration_ms: r.get(13)?,
        error: text(14)?.map(std::borrow::Cow::Owned),
        error_msg: text(15)?.map(String::into_boxed_str),
        request_id: r.get::<_, String>(16)?.into(),
        seq: r.get(17)?,
        requested_priority: r.get(18)?,
        capped_priority: r.get(19)?,
        effective_priority: r.get(20)?,
        queue_ms: r.get(21)?,
        stream: r.get(22)?,
        selector: text(23)?,
        api_key: text(24)?.map(Arc::from),
        session_id: text(25)?.map(Into::into),
        has_capture: false,
    })
}

fn stats(
    conn: &Connection,
    model: Option<&str>,
    retention: &Retention,
) -> rusqlite::Result<ActivityStats> {
    let query = ActivityQuery {
        models: model.map(str::to_owned).into_iter().collect(),
        ..ActivityQuery::default()
    };
    let (clause, args) = filters(conn, &query, retention)?;
    let mut builder = StatsBuilder::default();
    let mut statement = conn.prepare(&format!(
        "SELECT COALESCE(input_tokens, 0), COALESCE(output_tokens, 0),
                COALESCE(cache_tokens, 0), prompt_per_second, tokens_per_second
         FROM activity{clause}"
    ))?;
    let mut rows = statement.query(params_from_iter(args.iter()))?;
    while let Some(r) = rows.next()? {
        builder.add_values(r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
    }
    Ok(builder.finish())
}
