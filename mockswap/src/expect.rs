//! Expectations about priorities, and the request table printed when one fails.

use std::fmt::Write as _;

use crate::journal::RecordedRequest;
use crate::priority::PriorityHeader;

/// "N requests carried this priority" (or no `X-Priority` header, for `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expectation {
    pub(crate) priority: Option<i32>,
    pub(crate) times: usize,
}

impl Expectation {
    pub(crate) fn count(&self, requests: &[RecordedRequest]) -> usize {
        requests
            .iter()
            .filter(|r| matches_priority(&r.priority, self.priority))
            .count()
    }

    pub(crate) fn describe(&self) -> String {
        let what = match self.priority {
            Some(v) => format!("X-Priority {v}"),
            None => "no X-Priority header".to_owned(),
        };
        format!("{} request(s) with {what}", self.times)
    }
}

/// Whether a recorded header is exactly one well-formed `expected` value (or absent,
/// for `None`).
pub(crate) fn matches_priority(actual: &PriorityHeader, expected: Option<i32>) -> bool {
    match expected {
        Some(v) => *actual == PriorityHeader::Value(v),
        None => *actual == PriorityHeader::Absent,
    }
}

/// The table of every request received: seq, method, path, model, stream, x-priority.
pub fn requests_table(requests: &[RecordedRequest]) -> String {
    let rows: Vec<[String; 6]> = requests
        .iter()
        .map(|r| {
            [
                r.seq.to_string(),
                r.method.to_string(),
                r.path.clone(),
                r.model.clone().unwrap_or_else(|| "-".to_owned()),
                r.stream.to_string(),
                r.priority.to_string(),
            ]
        })
        .collect();
    let header = ["seq", "method", "path", "model", "stream", "x-priority"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "requests received by mockswap ({}):", rows.len());
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        let _ = writeln!(out, "  {}", line.join("  ").trim_end());
    }
    if rows.is_empty() {
        out.push_str("  (none)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectation_counts_exact_values_and_absence_only() {
        let p = |h| matches_priority(&h, Some(10));
        assert!(p(PriorityHeader::Value(10)));
        assert!(!p(PriorityHeader::Invalid("10.0".into())));
        assert!(!p(PriorityHeader::Duplicated(vec![
            "10".into(),
            "10".into()
        ])));
        assert!(matches_priority(&PriorityHeader::Absent, None));
        assert!(!matches_priority(&PriorityHeader::Value(0), None));
    }

    #[test]
    fn empty_table_says_none() {
        let table = requests_table(&[]);
        assert!(table.contains("(none)"));
        assert!(table.contains("x-priority"));
    }
}
