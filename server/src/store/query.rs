//! The parameters of `GET /api/metrics/activity`, read as llama-swap reads
//! them (same names, defaults, bounds and messages), plus this server's
//! filters by priority band and API key name; and the same query applied to
//! rows held in memory.

use std::cmp::Ordering;
use std::ops::RangeInclusive;

use super::Finished;
use crate::priority::Bands;

/// Rows per page when `limit` is not given.
pub(crate) const DEFAULT_LIMIT: usize = 25;
/// The largest `limit` (llama-swap's bound: 1 to 999).
pub(crate) const MAX_LIMIT: usize = 999;

/// A bad parameter: which one, and what is wrong with it (llama-swap's words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct QueryError {
    /// The query parameter at fault.
    pub param: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl QueryError {
    fn new(param: &'static str, message: impl Into<String>) -> Self {
        Self {
            param,
            message: message.into(),
        }
    }
}

/// The columns rows can be sorted by: llama-swap's keys (the UI's column ids)
/// and this server's `priority` and `queue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum SortKey {
    /// The row id (the order requests finished); the default.
    #[default]
    Id,
    /// The time the row was recorded (when the request ended).
    Time,
    /// The model ID.
    Model,
    /// The path.
    ReqPath,
    /// The status answered.
    Status,
    /// The response's content type.
    ContentType,
    /// Cached prompt tokens.
    Cached,
    /// Prompt tokens.
    Prompt,
    /// Generated tokens.
    Generated,
    /// Drafted tokens.
    Drafted,
    /// Prompt speed.
    PromptSpeed,
    /// Generation speed.
    GenSpeed,
    /// Duration.
    Duration,
    /// Effective priority.
    Priority,
    /// Time in the queue.
    Queue,
}

/// The SQL expression of a usage figure as a row shows it: the figure, else
/// -1 when the row reported some usage, else 0 ([`Finished::reported_usage`]).
macro_rules! shown {
    ($column:literal) => {
        concat!(
            "COALESCE(",
            $column,
            ", CASE WHEN COALESCE(input_tokens, output_tokens, cache_tokens, draft_tokens, \
             draft_acc_tokens, prompt_per_second, tokens_per_second) IS NULL THEN 0 ELSE -1 END)"
        )
    };
}

impl SortKey {
    /// Every key with its name in the query string.
    pub(crate) const ALL: [(&'static str, Self); 15] = [
        ("id", Self::Id),
        ("time", Self::Time),
        ("model", Self::Model),
        ("req_path", Self::ReqPath),
        ("resp_status_code", Self::Status),
        ("resp_content_type", Self::ContentType),
        ("cached", Self::Cached),
        ("prompt", Self::Prompt),
        ("generated", Self::Generated),
        ("drafted", Self::Drafted),
        ("prompt_speed", Self::PromptSpeed),
        ("gen_speed", Self::GenSpeed),
        ("duration", Self::Duration),
        ("priority", Self::Priority),
        ("queue", Self::Queue),
    ];

    fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .find(|(name, _)| *name == text)
            .map(|(_, key)| *key)
    }

    /// The SQL expression of the column (a fixed string: user input never
    /// reaches the query text). A figure sorts as it is shown: a row without
    /// any usage shows 0, one with some shows -1 for a figure it lacks.
    pub(super) fn column(self) -> &'static str {
        match self {
            Self::Id => "id",
            Self::Time => "ts_ms",
            Self::Model => "model",
            Self::ReqPath => "req_path",
            Self::Status => "resp_status_code",
            Self::ContentType => "resp_content_type",
            Self::Cached => shown!("cache_tokens"),
            Self::Prompt => "COALESCE(input_tokens, 0)",
            Self::Generated => "COALESCE(output_tokens, 0)",
            Self::Drafted => shown!("draft_tokens"),
            Self::PromptSpeed => shown!("prompt_per_second"),
            Self::GenSpeed => shown!("tokens_per_second"),
            Self::Duration => "duration_ms",
            Self::Priority => "COALESCE(effective_priority, capped_priority)",
            Self::Queue => "COALESCE(queue_ms, -1)",
        }
    }

    /// The same order on rows in memory.
    fn compare(self, a: &Finished, b: &Finished) -> Ordering {
        let count = |n: Option<u64>, none: i128| n.map_or(none, i128::from);
        // As shown: 0 without any usage, -1 for a figure missing from some.
        let unreported = |row: &Finished| if row.reported_usage() { -1_i32 } else { 0 };
        let shown = |row: &Finished, n: Option<u64>| count(n, i128::from(unreported(row)));
        let speed = |row: &Finished, s: Option<f64>| s.unwrap_or(f64::from(unreported(row)));
        match self {
            Self::Id => a.id.cmp(&b.id),
            Self::Time => a.time_ms.cmp(&b.time_ms),
            Self::Model => a.model.cmp(&b.model),
            Self::ReqPath => a.path.cmp(&b.path),
            Self::Status => a.status.cmp(&b.status),
            Self::ContentType => a.content_type.cmp(&b.content_type),
            Self::Cached => shown(a, a.cached_tokens).cmp(&shown(b, b.cached_tokens)),
            Self::Prompt => count(a.prompt_tokens, 0).cmp(&count(b.prompt_tokens, 0)),
            Self::Generated => count(a.completion_tokens, 0).cmp(&count(b.completion_tokens, 0)),
            Self::Drafted => shown(a, a.draft_tokens).cmp(&shown(b, b.draft_tokens)),
            Self::PromptSpeed => {
                speed(a, a.prompt_per_second).total_cmp(&speed(b, b.prompt_per_second))
            }
            Self::GenSpeed => {
                speed(a, a.tokens_per_second).total_cmp(&speed(b, b.tokens_per_second))
            }
            Self::Duration => a.duration_ms.cmp(&b.duration_ms),
            Self::Priority => ranked_at(a).cmp(&ranked_at(b)),
            Self::Queue => count(a.queue_ms, -1).cmp(&count(b.queue_ms, -1)),
        }
    }
}

/// Answered without an error: a 2xx or 3xx status and no error code.
pub(super) fn is_ok(row: &Finished) -> bool {
    (200..400).contains(&row.status) && row.error.is_none()
}

/// The SQL of [`is_ok`].
pub(super) const IS_OK_SQL: &str = "(resp_status_code BETWEEN 200 AND 399 AND error_code IS NULL)";

/// The priority a row is filed under: what ranked it, or, for a request
/// never admitted, its capped priority.
pub(super) fn ranked_at(row: &Finished) -> i32 {
    row.effective_priority.unwrap_or(row.capped_priority)
}

/// A page of activity rows, as asked for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ActivityQuery {
    /// Only these models (none: every model).
    pub models: Vec<String>,
    /// Arrived at or after this time (ms since the epoch).
    pub start_ms: Option<u64>,
    /// Arrived at or before this time (ms since the epoch).
    pub end_ms: Option<u64>,
    /// Only ids at or above.
    pub min_id: Option<u64>,
    /// Only ids at or below.
    pub max_id: Option<u64>,
    /// Only requests ranked within one of these priority ranges (the bands asked for).
    pub priorities: Vec<RangeInclusive<i32>>,
    /// Only requests made with one of these API key names.
    pub keys: Vec<String>,
    /// Only answered without an error (`Some(true)`: a 2xx/3xx status and no
    /// error code) or only failed (`Some(false)`).
    pub ok: Option<bool>,
    /// Rows per page (1 to [`MAX_LIMIT`]).
    pub limit: usize,
    /// The page, from 1.
    pub page: usize,
    /// The sort column.
    pub sort: SortKey,
    /// Ascending (else descending, the default).
    pub ascending: bool,
}

impl Default for ActivityQuery {
    fn default() -> Self {
        Self {
            models: Vec::new(),
            start_ms: None,
            end_ms: None,
            min_id: None,
            max_id: None,
            priorities: Vec::new(),
            keys: Vec::new(),
            ok: None,
            limit: DEFAULT_LIMIT,
            page: 1,
            sort: SortKey::Id,
            ascending: false,
        }
    }
}

impl ActivityQuery {
    /// Reads a query string (without the `?`): `model` (repeatable), `start`
    /// and `end` (RFC 3339), `min_id`, `max_id`, `limit` (1-999, default 25),
    /// `page` (from 1), `sort` (a column key), `order` (`asc`/`desc`), and
    /// this server's `band` (a priority band name of `bands`, repeatable) and
    /// `key` (an API key name, repeatable) and `status` (`ok` or `error`).
    /// Unknown parameters are ignored, as
    /// llama-swap ignores them.
    ///
    /// # Errors
    ///
    /// The first bad parameter, named, with llama-swap's message.
    pub(crate) fn parse(query: Option<&str>, bands: &Bands) -> Result<Self, QueryError> {
        let mut out = Self::default();
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query.unwrap_or("").as_bytes())
            .map(|(k, v)| (k.into_owned(), v.trim().to_owned()))
            .collect();
        // The first value of a single-valued parameter counts, as in Go.
        let first = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .filter(|v| !v.is_empty())
        };
        let all = |name: &'static str| {
            pairs
                .iter()
                .filter(move |(k, v)| k == name && !v.is_empty())
                .map(|(_, v)| v.clone())
        };
        out.models = all("model").collect();
        out.keys = all("key").collect();
        for band in all("band") {
            out.priorities.push(band_range(bands, &band).ok_or_else(|| {
                QueryError::new("band", format!("unknown priority band {band:?}"))
            })?);
        }
        out.ok = match first("status") {
            None => None,
            Some("ok") => Some(true),
            Some("error") => Some(false),
            Some(_) => return Err(QueryError::new("status", "status must be ok or error")),
        };
        out.start_ms = first("start")
            .map(|v| timestamp("start", v, false))
            .transpose()?;
        out.end_ms = first("end")
            .map(|v| timestamp("end", v, true))
            .transpose()?;
        if let (Some(start), Some(end)) = (out.start_ms, out.end_ms)
            && start > end
        {
            return Err(QueryError::new("start", "start must be before end"));
        }
        out.min_id = first("min_id").map(|v| row_id("min_id", v)).transpose()?;
        out.max_id = first("max_id").map(|v| row_id("max_id", v)).transpose()?;
        if let (Some(min), Some(max)) = (out.min_id, out.max_id)
            && min > max
        {
            return Err(QueryError::new("min_id", "min_id must be <= max_id"));
        }
        if let Some(v) = first("limit") {
            let limit: i64 = v
                .parse()
                .map_err(|_| QueryError::new("limit", "invalid limit"))?;
            out.limit = usize::try_from(limit)
                .ok()
                .filter(|l| (1..=MAX_LIMIT).contains(l))
                .ok_or_else(|| QueryError::new("limit", "limit must be between 1 and 999"))?;
        }
        if let Some(v) = first("page") {
            out.page = v
                .parse::<usize>()
                .ok()
                .filter(|p| *p >= 1)
                .ok_or_else(|| QueryError::new("page", "page must be >= 1"))?;
        }
        if let Some(v) = first("sort") {
            out.sort =
                SortKey::parse(v).ok_or_else(|| QueryError::new("sort", "invalid sort column"))?;
        }
        if let Some(v) = first("order") {
            out.ascending = match v.to_ascii_lowercase().as_str() {
                "asc" => true,
                "desc" => false,
                _ => return Err(QueryError::new("order", "order must be asc or desc")),
            };
        }
        Ok(out)
    }

    /// Whether `row` passes the filters.
    pub(crate) fn matches(&self, row: &Finished) -> bool {
        (self.models.is_empty() || self.models.iter().any(|m| **m == *row.model))
            && self.start_ms.is_none_or(|s| row.time_ms >= s)
            && self.end_ms.is_none_or(|e| row.time_ms <= e)
            && self.min_id.is_none_or(|m| row.id >= m)
            && self.max_id.is_none_or(|m| row.id <= m)
            && (self.priorities.is_empty()
                || self.priorities.iter().any(|r| r.contains(&ranked_at(row))))
            && self.ok.is_none_or(|ok| ok == is_ok(row))
            && (self.keys.is_empty()
                || row
                    .api_key
                    .as_deref()
                    .is_some_and(|k| self.keys.iter().any(|want| want == k)))
    }

    /// Rows skipped before the page, bounded by what SQLite's `OFFSET`
    /// takes (a page that far is empty either way).
    pub(crate) fn offset(&self) -> usize {
        const MAX_OFFSET: usize = 1 << 62;
        self.page
            .saturating_sub(1)
            .saturating_mul(self.limit)
            .min(MAX_OFFSET)
    }

    /// Filters, sorts and cuts `rows` (held in memory) to the page asked for.
    pub(crate) fn page_of<'a, T>(&self, rows: impl IntoIterator<Item = &'a T>) -> Page<T>
    where
        T: std::ops::Deref<Target = Finished> + Clone + 'a,
    {
        let mut matching: Vec<&T> = rows.into_iter().filter(|r| self.matches(r)).collect();
        let total = matching.len();
        matching.sort_by(|a, b| {
            // Ties in the column keep a stable page order by id.
            let order = self.sort.compare(a, b).then_with(|| a.id.cmp(&b.id));
            if self.ascending {
                order
            } else {
                order.reverse()
            }
        });
        let data = matching
            .into_iter()
            .skip(self.offset())
            .take(self.limit)
            .cloned()
            .collect();
        Page::new(data, self, total)
    }
}

/// One page of rows, in llama-swap's shape.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Page<T> {
    /// The rows.
    pub data: Vec<T>,
    /// The page number.
    pub page: usize,
    /// Rows per page.
    pub limit: usize,
    /// Rows matching the filters, on every page.
    pub total: usize,
    /// Pages of `limit` rows the matching rows fill.
    pub total_pages: usize,
}

impl<T> Page<T> {
    /// The page of `query` holding `data`, out of `total` matching rows.
    pub(crate) fn new(data: Vec<T>, query: &ActivityQuery, total: usize) -> Self {
        Self {
            data,
            page: query.page,
            limit: query.limit,
            total,
            total_pages: total.div_ceil(query.limit.max(1)),
        }
    }
}

/// The priorities band `name` covers: from its lower bound to the next
/// band's, the lowest band from `i32::MIN`.
fn band_range(bands: &Bands, name: &str) -> Option<RangeInclusive<i32>> {
    let all: Vec<_> = bands.iter().collect();
    let index = all.iter().position(|b| b.name == name)?;
    let from = if index == 0 {
        i32::MIN
    } else {
        all[index].from
    };
    let to = all
        .get(index + 1)
        .map_or(i32::MAX, |next| next.from.saturating_sub(1));
    Some(from..=to)
}

/// A `start` or `end` read to the whole second, as llama-swap compares them
/// (it keeps its rows' times in seconds): `start` from the beginning of its
/// second, `end` (`to_end`) to the end of its, so `end=` a row's time as
/// llama-swap prints it includes that row. A time before 1970 bounds
/// nothing as a `start` and leaves nothing as an `end`.
fn timestamp(param: &'static str, text: &str, to_end: bool) -> Result<u64, QueryError> {
    let at: jiff::Timestamp = text.parse().map_err(|_| {
        QueryError::new(
            param,
            format!("invalid '{param}' timestamp, use RFC3339 format"),
        )
    })?;
    let ms = at.as_second().saturating_mul(1000);
    let ms = if to_end { ms.saturating_add(999) } else { ms };
    Ok(u64::try_from(ms).unwrap_or(0))
}

fn row_id(param: &'static str, text: &str) -> Result<u64, QueryError> {
    text.parse::<u64>()
        .ok()
        .filter(|id| *id >= 1)
        .ok_or_else(|| QueryError::new(param, format!("{param} must be >= 1")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;

    fn parse(query: &str) -> Result<ActivityQuery, QueryError> {
        ActivityQuery::parse(Some(query), &Bands::default())
    }

    #[test]
    fn defaults_are_llama_swaps() {
        let q = parse("").unwrap();
        assert_eq!(
            (q.limit, q.page, q.sort, q.ascending),
            (25, 1, SortKey::Id, false)
        );
    }

    #[test]
    fn every_bad_parameter_is_named_with_llama_swaps_message() {
        let cases = [
            ("limit=0", "limit", "limit must be between 1 and 999"),
            ("limit=1000", "limit", "limit must be between 1 and 999"),
            ("limit=x", "limit", "invalid limit"),
            ("page=0", "page", "page must be >= 1"),
            ("page=-2", "page", "page must be >= 1"),
            ("sort=bogus", "sort", "invalid sort column"),
            ("order=up", "order", "order must be asc or desc"),
            (
                "start=yesterday",
                "start",
                "invalid 'start' timestamp, use RFC3339 format",
            ),
            (
                "end=2026-13-01",
                "end",
                "invalid 'end' timestamp, use RFC3339 format",
            ),
            ("min_id=0", "min_id", "min_id must be >= 1"),
            ("max_id=x", "max_id", "max_id must be >= 1"),
            ("min_id=5&max_id=2", "min_id", "min_id must be <= max_id"),
            (
                "start=2026-12-03T00:00:00Z&end=2026-12-01T00:00:00Z",
                "start",
                "start must be before end",
            ),
            ("band=urgent", "band", "unknown priority band \"urgent\""),
            ("status=fine", "status", "status must be ok or error"),
        ];
        for (query, param, message) in cases {
            let error = parse(query).unwrap_err();
            assert_eq!(
                (error.param, error.message.as_str()),
                (param, message),
                "{query}"
            );
        }
    }

    #[test]
    fn start_and_end_cover_whole_seconds_as_llama_swaps_do() {
        let q = parse("start=2026-12-01T00:00:00.700Z&end=2026-12-01T00:00:05.2Z").unwrap();
        assert_eq!(q.start_ms, Some(1_796_083_200_000));
        assert_eq!(q.end_ms, Some(1_796_083_205_999));
        // Go's zero time and other times before 1970 are read, not refused.
        let q = parse("start=0001-01-01T00:00:00Z").unwrap();
        assert_eq!(q.start_ms, Some(0), "every row is after it");
        let q = parse("end=1969-12-31T23:59:58Z").unwrap();
        assert_eq!(q.end_ms, Some(0), "no row is before it");
    }

    #[test]
    fn good_parameters_are_read() {
        let q = parse(
            "model=a&model=b&model=&start=2026-12-01T00:00:00Z&end=2026-12-02T00:00:00%2B01:00\
             &min_id=2&max_id=9&limit=999&page=3&sort=gen_speed&order=ASC&band=elevated&key=ci",
        )
        .unwrap();
        assert_eq!(q.models, ["a", "b"]);
        assert_eq!(q.start_ms, Some(1_796_083_200_000));
        assert_eq!(
            q.end_ms,
            Some(1_796_166_000_999),
            "to the end of its second"
        );
        assert_eq!((q.min_id, q.max_id), (Some(2), Some(9)));
        assert_eq!(
            (q.limit, q.page, q.sort, q.ascending),
            (999, 3, SortKey::GenSpeed, true)
        );
        assert_eq!(q.priorities, [1..=i32::MAX]);
        assert_eq!(q.keys, ["ci"]);
        assert_eq!(parse("band=low").unwrap().priorities, [i32::MIN..=-1]);
        assert_eq!(parse("band=normal").unwrap().priorities, [0..=0]);
    }

    fn row(id: u64, model: &str, tps: Option<f64>) -> Arc<Finished> {
        Arc::new(Finished {
            id,
            model: model.into(),
            time_ms: id * 1000,
            tokens_per_second: tps,
            ..Finished::default()
        })
    }

    #[test]
    fn pages_filter_sort_and_count_rows_in_memory() {
        let rows: Vec<_> = (1..=30)
            .map(|i| row(i, if i % 3 == 0 { "b" } else { "a" }, Some(i as f64)))
            .collect();
        let q = parse("model=a&limit=7&page=2").unwrap();
        let page = q.page_of(&rows);
        assert_eq!(
            (page.total, page.total_pages, page.page, page.limit),
            (20, 3, 2, 7)
        );
        let ids: Vec<u64> = page.data.iter().map(|r| r.id).collect();
        assert_eq!(
            ids,
            [19, 17, 16, 14, 13, 11, 10],
            "newest first, second page"
        );
        let q = parse("sort=gen_speed&order=asc&limit=3&min_id=10&max_id=20").unwrap();
        let ids: Vec<u64> = q.page_of(&rows).data.iter().map(|r| r.id).collect();
        assert_eq!(ids, [10, 11, 12]);
        let q = parse("start=1970-01-01T00:00:05Z&end=1970-01-01T00:00:06Z").unwrap();
        assert_eq!(q.page_of(&rows).total, 2);
        let empty = parse("page=9").unwrap().page_of(&rows);
        assert_eq!((empty.data.len(), empty.total), (0, 30));
    }
}
