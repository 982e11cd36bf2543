#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::manual_is_multiple_of
)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::activity::Activity;
use crate::priority::Bands;
use crate::store::query::MAX_LIMIT;
use crate::store::sqlite::APPLICATION_ID;

fn row(id: u64) -> Arc<Finished> {
    Arc::new(Finished {
        id,
        request_id: format!("r{id}").into(),
        time_ms: 1_700_000_000_000 + id * 1000,
        model: if id % 3 == 0 { "b" } else { "a" }.into(),
        path: "/v1/chat/completions".into(),
        status: if id % 7 == 0 { 500 } else { 200 },
        content_type: Some("application/json".into()),
        requested_priority: i32::try_from(id % 5).unwrap() - 2,
        capped_priority: i32::try_from(id % 5).unwrap() - 2,
        effective_priority: (id % 4 != 0).then(|| i32::try_from(id % 5).unwrap() - 2),
        prompt_tokens: Some(id * 10),
        completion_tokens: (id % 2 == 0).then_some(id),
        cached_tokens: (id % 3 == 1).then_some(id),
        draft_tokens: Some(id % 6),
        draft_accepted: Some(id % 4),
        prompt_per_second: (id % 5 != 0).then(|| (id * 37 % 101) as f64),
        tokens_per_second: Some((id * 13 % 17) as f64 + 0.5),
        duration_ms: id * 31 % 97,
        queue_ms: (id % 2 == 1).then_some(id * 3 % 11),
        error: (id % 7 == 0).then(|| "upstream_failed".into()),
        error_msg: (id % 7 == 0).then(|| "boom".into()),
        seq: Some(id),
        stream: id % 2 == 0,
        selector: (id % 5 == 0).then(|| "fast".to_owned()),
        api_key: (id % 2 == 0).then(|| Arc::from(if id % 4 == 0 { "ci" } else { "web" })),
        session_id: (id % 3 == 0).then(|| "s".into()),
        has_capture: false,
    })
}

fn settings(path: &Path, max_rows: u64) -> StoreSettings {
    StoreSettings {
        path: Some(path.to_owned()),
        retention: Retention {
            max_rows,
            max_age: None,
        },
    }
}

async fn all(history: &History) -> Vec<Finished> {
    let query = ActivityQuery {
        limit: MAX_LIMIT,
        ascending: true,
        ..ActivityQuery::default()
    };
    history.database().unwrap().page(query).await.unwrap().data
}

#[tokio::test]
async fn rows_are_read_back_as_written_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let history = History::open(&settings(&path, 0)).unwrap();
    assert_eq!(history.next_id(), 1);
    let db = history.database().unwrap();
    // Written as one batch: three statements of 32 rows and 4 single rows.
    for id in 1..=100 {
        db.record(row(id));
    }
    // Read your writes: the query waits for the rows handed over before it.
    let read = all(&history).await;
    let expected: Vec<Finished> = (1..=100).map(|id| (*row(id)).clone()).collect();
    assert_eq!(read, expected);
    history.close();
    drop(history);

    let reopened = History::open(&settings(&path, 0)).unwrap();
    assert_eq!(reopened.next_id(), 101, "ids go on after a restart");
    assert_eq!(all(&reopened).await, expected);
    let counters = reopened.database().unwrap().counters();
    assert_eq!(
        counters.written.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

#[tokio::test]
async fn retention_keeps_the_newest_rows_and_ids_are_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let history = History::open(&settings(&path, 100)).unwrap();
    for id in 1..=2500 {
        history.database().unwrap().record(row(id));
    }
    // 2 500 rows may take longer to write under load than a query waits.
    tokio::time::timeout(
        Duration::from_secs(60),
        history.database().unwrap().settled(),
    )
    .await
    .expect("the writer never caught up");
    let ids: Vec<u64> = all(&history).await.iter().map(|r| r.id).collect();
    assert_eq!(ids, (2401..=2500).collect::<Vec<_>>(), "the newest 100");
    history.close();
    drop(history);
    let reopened = History::open(&settings(&path, 100)).unwrap();
    let kept = all(&reopened).await;
    let ids: Vec<u64> = kept.iter().map(|r| r.id).collect();
    assert_eq!(ids, (2401..=2500).collect::<Vec<_>>(), "pruned at start");
    assert_eq!(reopened.next_id(), 2501);
}

#[tokio::test]
async fn rows_older_than_the_maximum_age_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let history = History::open(&settings(&path, 0)).unwrap();
    let old = Finished {
        time_ms: 1_000,
        ..(*row(1)).clone()
    };
    history.database().unwrap().record(Arc::new(old));
    let recent = Finished {
        time_ms: u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap(),
        ..(*row(2)).clone()
    };
    history.database().unwrap().record(Arc::new(recent));
    assert_eq!(all(&history).await.len(), 2);
    history.close();
    drop(history);
    let aged = StoreSettings {
        path: Some(path.clone()),
        retention: Retention {
            max_rows: 0,
            max_age: Some(Duration::from_secs(3600)),
        },
    };
    let ids: Vec<u64> = all(&History::open(&aged).unwrap())
        .await
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, [2]);
}

/// Rows past the bounds wait in the file for the next deletion (every
/// thousand rows written), but no query shows them: the page, its total and
/// the stats are exactly what the bounds keep.
#[tokio::test]
async fn rows_past_the_bounds_are_never_shown_while_they_wait_for_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let bounded = StoreSettings {
        path: Some(path.clone()),
        retention: Retention {
            max_rows: 3,
            max_age: Some(Duration::from_secs(3600)),
        },
    };
    let history = Arc::new(History::open(&bounded).unwrap());
    record_aged(&history, 6, 2);
    let page = history
        .database()
        .unwrap()
        .page(ActivityQuery {
            limit: MAX_LIMIT,
            ..ActivityQuery::default()
        })
        .await
        .unwrap();
    let ids: Vec<u64> = page.data.iter().map(|r| r.id).collect();
    assert_eq!(ids, [6, 5, 4], "the newest three");
    assert_eq!(page.total, 3);
    let stats = history.database().unwrap().stats(None).await.unwrap();
    assert_eq!(stats.total_requests, 3);
    let in_file = || {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.query_row("SELECT COUNT(*) FROM activity", [], |r| r.get::<_, u64>(0))
            .unwrap()
    };
    assert_eq!(in_file(), 6, "not deleted yet: deletion is not per row");
    // The next deletion leaves the file as the queries saw it.
    assert!(apply_retention(&history, bounded.retention.clone()).await);
    assert_eq!(in_file(), 3);
    assert_eq!(ids_of(&all(&history).await), [4, 5, 6]);
    history.close();
}

/// Records rows 1 to `count`, the first `old` of them two hours old and the
/// rest stamped now.
fn record_aged(history: &History, count: u64, old: u64) {
    let now = u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap();
    for id in 1..=count {
        let time_ms = if id <= old { now - 7_200_000 } else { now };
        let r = Finished {
            time_ms,
            ..(*row(id)).clone()
        };
        history.database().unwrap().record(Arc::new(r));
    }
}

/// `History::set_retention` off the runtime, as a reload calls it.
async fn apply_retention(history: &Arc<History>, retention: Retention) -> bool {
    let history = Arc::clone(history);
    tokio::task::spawn_blocking(move || history.set_retention(retention, Duration::from_secs(60)))
        .await
        .unwrap()
}

fn ids_of(rows: &[Finished]) -> Vec<u64> {
    rows.iter().map(|r| r.id).collect()
}

#[tokio::test]
async fn a_page_past_any_offset_is_empty_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let history = History::open(&settings(&dir.path().join("history.db"), 0)).unwrap();
    history.database().unwrap().record(row(1));
    for query in [
        "limit=999&page=10000000000000000",
        "page=9223372036854775807",
    ] {
        let query = ActivityQuery::parse(Some(query), &Bands::default()).unwrap();
        let page = history.database().unwrap().page(query).await.unwrap();
        assert!(page.data.is_empty());
        assert_eq!(page.total, 1);
    }
}

/// New bounds apply to the open database: the rows handed over before are
/// written first, then what the bounds exclude is deleted, before
/// `set_retention` returns.
#[tokio::test]
async fn new_bounds_apply_to_the_open_database_after_the_rows_before_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let history = Arc::new(History::open(&settings(&path, 0)).unwrap());
    record_aged(&history, 30, 10);
    let hour = Retention {
        max_rows: 0,
        max_age: Some(Duration::from_secs(3600)),
    };
    assert!(apply_retention(&history, hour).await);
    assert_eq!(ids_of(&all(&history).await), (11..=30).collect::<Vec<_>>());
    let five = Retention {
        max_rows: 5,
        max_age: None,
    };
    assert!(apply_retention(&history, five).await);
    assert_eq!(ids_of(&all(&history).await), (26..=30).collect::<Vec<_>>());
    history.close();
    let one = Retention {
        max_rows: 1,
        max_age: None,
    };
    assert!(
        !apply_retention(&history, one).await,
        "a closed database takes no bounds"
    );
}

/// Closing writes what was handed over, folds the write-ahead log into the
/// file (it is removed), and later queries say the database was closed.
#[tokio::test]
async fn a_closed_database_has_written_everything_and_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let wal = dir.path().join("history.db-wal");
    let history = History::open(&settings(&path, 0)).unwrap();
    for id in 1..=50 {
        history.database().unwrap().record(row(id));
    }
    assert_eq!(all(&history).await.len(), 50);
    assert!(wal.exists(), "in WAL mode while open");
    history.close();
    assert!(!wal.exists(), "closed: no connection holds the log");
    let error = history
        .database()
        .unwrap()
        .page(ActivityQuery::default())
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Closed { .. }), "{error}");
    assert!(error.to_string().contains("history.db"), "{error}");
    // Everything handed over before the close is in the file.
    let reopened = History::open(&settings(&path, 0)).unwrap();
    assert_eq!(all(&reopened).await.len(), 50);
    assert_eq!(reopened.next_id(), 51);
}

async fn ids_between(history: &History, start_ms: Option<u64>, end_ms: Option<u64>) -> Vec<u64> {
    let query = ActivityQuery {
        limit: MAX_LIMIT,
        ascending: true,
        start_ms,
        end_ms,
        ..ActivityQuery::default()
    };
    let page = history.database().unwrap().page(query).await.unwrap();
    assert_eq!(page.total, page.data.len());
    page.data.iter().map(|r| r.id).collect()
}

/// The database keeps no index on the time: `start` and `end` become an id
/// range, which holds because a row is never written with a time before the
/// last one's, within a run and across a restart.
#[tokio::test]
async fn times_never_go_back_and_start_and_end_select_by_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let history = History::open(&settings(&path, 0)).unwrap();
    let at = |id: u64| row(id).time_ms;
    for id in 1..=40 {
        let mut r = (*row(id)).clone();
        if id == 11 {
            // Ended a moment before row 10 (on another thread).
            r.time_ms = at(10) - 1;
        }
        history.database().unwrap().record(Arc::new(r));
    }
    let read = all(&history).await;
    assert_eq!(read[10].time_ms, at(10), "recorded at the last row's time");
    assert!(read.windows(2).all(|w| w[0].time_ms <= w[1].time_ms));
    let range = |a: u64, b: u64| (a..=b).collect::<Vec<u64>>();
    assert_eq!(
        ids_between(&history, Some(at(4)), Some(at(12))).await,
        range(4, 12)
    );
    assert_eq!(
        ids_between(&history, Some(at(10)), Some(at(10))).await,
        [10, 11]
    );
    assert_eq!(
        ids_between(&history, Some(at(4) + 1), Some(at(12) - 1)).await,
        range(5, 11)
    );
    assert_eq!(ids_between(&history, None, Some(at(3))).await, range(1, 3));
    assert_eq!(
        ids_between(&history, Some(at(38)), None).await,
        range(38, 40)
    );
    assert!(
        ids_between(&history, None, Some(at(1) - 1))
            .await
            .is_empty()
    );
    assert!(
        ids_between(&history, Some(at(40) + 1), None)
            .await
            .is_empty()
    );
    history.close();
    drop(history);

    // Reopened keeping the newest 25: ids start at 16, and a row handed
    // over with an older time is recorded at the last one's.
    let reopened = History::open(&settings(&path, 25)).unwrap();
    assert_eq!(reopened.last_ms(), at(40));
    assert_eq!(
        ids_between(&reopened, Some(0), Some(at(17))).await,
        range(16, 17)
    );
    let mut late = (*row(41)).clone();
    late.time_ms = 5;
    reopened.database().unwrap().record(Arc::new(late));
    assert_eq!(
        ids_between(&reopened, Some(at(20)), Some(at(22))).await,
        range(20, 22)
    );
    assert_eq!(
        ids_between(&reopened, Some(0), Some(at(17))).await,
        [17],
        "still the newest 25"
    );
    assert_eq!(ids_between(&reopened, Some(at(40)), None).await, [40, 41]);
    assert_eq!(all(&reopened).await.last().unwrap().time_ms, at(40));
    // The time sort is the ids' order.
    let by_time =
        ActivityQuery::parse(Some("sort=time&order=desc&limit=3"), &Bands::default()).unwrap();
    let page = reopened.database().unwrap().page(by_time).await.unwrap();
    assert_eq!(
        page.data.iter().map(|r| r.id).collect::<Vec<_>>(),
        [41, 40, 39]
    );
}

/// A database of the first schema (with its index on the time) is migrated:
/// the index is dropped and its rows are kept.
#[tokio::test]
async fn a_database_of_the_first_schema_is_migrated_and_keeps_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "application_id", APPLICATION_ID)
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute(
            "INSERT INTO activity (ts_ms, model, req_path, resp_status_code, duration_ms,
                 request_id, requested_priority, capped_priority, stream)
             VALUES (1700000001000, 'a', '/v1/chat/completions', 200, 5, 'r1', 0, 0, 0)",
            [],
        )
        .unwrap();
    }
    let history = History::open(&settings(&path, 0)).unwrap();
    assert_eq!(history.next_id(), 2);
    assert_eq!(history.last_ms(), 1_700_000_001_000);
    assert_eq!(
        ids_between(&history, Some(1_700_000_001_000), None).await,
        [1]
    );
    history.close();
    drop(history);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let indexes: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'activity'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(indexes, ["activity_model"]);
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 2);
}

#[tokio::test]
async fn a_stalled_database_never_holds_up_recording_and_every_row_is_accounted_for() {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let history = History::open(&settings(&path, 0)).unwrap();
    // Another connection holds the write lock: the writer waits as on a
    // stalled disk, and its queue (65 536 rows) fills.
    let blocker = rusqlite::Connection::open(&path).unwrap();
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let db = history.database().unwrap();
    let sent = 70_000_u64;
    for id in 1..=sent {
        db.record(row(id));
    }
    let counters = db.counters();
    // A recording that waited for room would never drop a row.
    let dropped = counters.dropped.load(Relaxed);
    assert!(dropped > 0, "nothing was dropped");
    blocker.execute_batch("COMMIT").unwrap();
    // Writes what was queued, then stops: every row is written, dropped or
    // lost with a refused batch, none silently.
    history.close();
    let counters = history.database().unwrap().counters();
    let written = counters.written.load(Relaxed);
    let failed = counters.failed.load(Relaxed);
    assert_eq!(counters.sent.load(Relaxed), sent);
    assert_eq!(written + counters.dropped.load(Relaxed) + failed, sent);
    assert!(written > 0, "nothing was written once the lock went");
}

fn open_error(path: &Path) -> String {
    History::open(&settings(path, 0)).unwrap_err().to_string()
}

#[test]
fn a_file_that_is_not_our_database_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(
        &text,
        "not a database, just some text that is long enough ".repeat(20),
    )
    .unwrap();
    let message = open_error(&text);
    assert!(message.contains(&text.display().to_string()), "{message}");

    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE users (name TEXT)")
        .unwrap();
    let message = open_error(&other);
    assert!(
        message.contains(&other.display().to_string()) && message.contains("other data"),
        "{message}"
    );

    let llama_swap = dir.path().join("llama-swap.db");
    rusqlite::Connection::open(&llama_swap)
        .unwrap()
        .execute_batch(
            "CREATE TABLE goose_db_version (id INTEGER); CREATE TABLE activity (id INTEGER)",
        )
        .unwrap();
    let message = open_error(&llama_swap);
    assert!(
        message.contains("llama-swap's own activity database"),
        "{message}"
    );

    let message = open_error(dir.path());
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );
    let missing = dir.path().join("no/such/dir/history.db");
    assert!(open_error(&missing).contains("no/such/dir"));
}

#[test]
fn a_database_from_a_newer_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    History::open(&settings(&path, 0)).unwrap().close();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", MIGRATIONS.len() + 1)
        .unwrap();
    drop(conn);
    let message = open_error(&path);
    assert!(message.contains("newer"), "{message}");
}

#[test]
fn a_new_database_is_ours_in_wal_mode_at_the_latest_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    History::open(&settings(&path, 0)).unwrap().close();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let read = |sql: &str| -> String {
        conn.query_row(sql, [], |r| r.get::<_, rusqlite::types::Value>(0))
            .map(|v| format!("{v:?}"))
            .unwrap()
    };
    assert_eq!(
        read("PRAGMA application_id"),
        format!("Integer({APPLICATION_ID})")
    );
    assert_eq!(
        read("PRAGMA user_version"),
        format!("Integer({})", MIGRATIONS.len())
    );
    assert_eq!(read("PRAGMA journal_mode"), "Text(\"wal\")");
}

/// The database answers every query as the in-memory history does.
#[tokio::test]
async fn queries_on_the_database_match_queries_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let history = History::open(&settings(&dir.path().join("h.db"), 0)).unwrap();
    let activity = Activity::new(1000);
    for id in 1..=120 {
        history.database().unwrap().record(row(id));
    }
    // Written before the first query, whatever the machine's load (a query
    // waits for them 2 s at most).
    history.database().unwrap().settled().await;
    // The ring holds the same rows (ids assigned in the same order).
    let rows: Vec<_> = (1..=120).map(row).collect();
    let bands = Bands::default();
    let queries = [
        "",
        "limit=7&page=3",
        "model=b",
        "model=a&model=b&order=asc",
        "min_id=10&max_id=30&sort=prompt",
        "sort=cached&order=asc&limit=50",
        "sort=drafted&limit=40",
        "sort=gen_speed&page=2&limit=9",
        "sort=prompt_speed",
        "sort=duration&order=asc",
        "sort=priority&limit=30",
        "sort=queue&order=asc&limit=30",
        "sort=resp_status_code",
        "sort=model&order=asc",
        "sort=time",
        "band=elevated&limit=100",
        "band=low&band=normal&limit=100",
        "key=ci&limit=100",
        "key=web&model=a",
        "start=2023-11-14T22:13:40Z&end=2023-11-14T22:14:00Z&limit=100",
        "page=50",
        "status=ok&limit=100",
        "status=error&limit=100",
    ];
    for text in queries {
        let query = ActivityQuery::parse(Some(text), &bands).unwrap();
        let from_db = history
            .database()
            .unwrap()
            .page(query.clone())
            .await
            .unwrap();
        let in_memory = query.page_of(&rows);
        let ids = |data: &[u64]| data.to_vec();
        let db_ids: Vec<u64> = from_db.data.iter().map(|r| r.id).collect();
        let mem_ids: Vec<u64> = in_memory.data.iter().map(|r| r.id).collect();
        assert_eq!(ids(&db_ids), mem_ids, "{text}");
        assert_eq!(
            (
                from_db.total,
                from_db.total_pages,
                from_db.page,
                from_db.limit
            ),
            (
                in_memory.total,
                in_memory.total_pages,
                in_memory.page,
                in_memory.limit
            ),
            "{text}"
        );
    }
    for model in [None, Some("a"), Some("zzz")] {
        let db = history
            .database()
            .unwrap()
            .stats(model.map(str::to_owned))
            .await
            .unwrap();
        let mut builder = StatsBuilder::default();
        rows.iter()
            .filter(|r| model.is_none_or(|m| *r.model == *m))
            .for_each(|r| builder.add(r));
        assert_eq!(db, builder.finish(), "{model:?}");
    }
    // Without a database, the activity pages its ring.
    assert_eq!(
        activity.page(ActivityQuery::default()).await.unwrap().total,
        0
    );
}

/// A usage figure sorts as the row shows it: 0 for a row without any usage,
/// -1 for a figure missing from a row with some (llama-swap stores and sorts
/// the figures it shows), in the database and in memory alike.
#[tokio::test]
async fn rows_sort_by_the_usage_figures_they_show() {
    let none = Finished {
        prompt_tokens: None,
        completion_tokens: None,
        cached_tokens: None,
        draft_tokens: None,
        draft_accepted: None,
        prompt_per_second: None,
        tokens_per_second: None,
        ..(*row(1)).clone()
    };
    let some = Finished {
        cached_tokens: None,
        draft_tokens: None,
        draft_accepted: None,
        prompt_per_second: None,
        tokens_per_second: None,
        ..(*row(2)).clone()
    };
    let all = Finished {
        cached_tokens: Some(3),
        draft_tokens: Some(3),
        draft_accepted: Some(1),
        prompt_per_second: Some(5.0),
        tokens_per_second: Some(5.0),
        ..(*row(3)).clone()
    };
    let rows: Vec<Arc<Finished>> = vec![Arc::new(none), Arc::new(some), Arc::new(all)];
    let dir = tempfile::tempdir().unwrap();
    let history = History::open(&settings(&dir.path().join("h.db"), 0)).unwrap();
    for r in &rows {
        history.database().unwrap().record(Arc::clone(r));
    }
    for sort in ["cached", "drafted", "prompt_speed", "gen_speed"] {
        let text = format!("sort={sort}&order=asc");
        let query = ActivityQuery::parse(Some(&text), &Bands::default()).unwrap();
        let from_db = history
            .database()
            .unwrap()
            .page(query.clone())
            .await
            .unwrap();
        assert_eq!(
            ids_of(&from_db.data),
            [2, 1, 3],
            "{sort}: -1, 0, then 3 or 5"
        );
        let in_memory = query.page_of(&rows);
        let mem: Vec<u64> = in_memory.data.iter().map(|r| r.id).collect();
        assert_eq!(mem, [2, 1, 3], "{sort} in memory");
    }
}
