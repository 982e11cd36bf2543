//! The tracing layer writing the proxy's log (history and stdout), and the
//! settings a reload changes. Built with the `cli` feature only.

use std::cell::Cell;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

use super::fields::{Message, Model, Pairs, SpanFields};
use super::stdout::StdoutWriter;
use super::{ProxyLog, UPSTREAM_TARGET, write_timestamp};
use crate::config::{Config, LogLevel, LogTimeFormat, LogToStdout};

/// The settings a reload may change: level and timestamp format.
#[derive(Debug)]
pub struct LogSettings {
    level: AtomicU8,
    time_format: Mutex<Option<LogTimeFormat>>,
    to_stdout: LogToStdout,
    colour: bool,
    /// `RUST_LOG` decides what is logged instead of `logLevel`.
    env_filtered: bool,
    /// Stdout lines held until [`LogSettings::release_stdout`], so that the
    /// `listening on` line comes first; `None` once released.
    held: Mutex<Option<Vec<String>>>,
    /// Where released lines go: a writer thread, off the request path.
    stdout: StdoutWriter,
}

/// Most lines held back before the listening line; more are dropped.
const MAX_HELD: usize = 10_000;

fn level_rank(level: LogLevel) -> u8 {
    match level {
        LogLevel::Debug => 0,
        LogLevel::Warn => 2,
        LogLevel::Error => 3,
        _ => 1,
    }
}

fn event_rank(level: Level) -> u8 {
    match level {
        Level::TRACE | Level::DEBUG => 0,
        Level::INFO => 1,
        Level::WARN => 2,
        Level::ERROR => 3,
    }
}

impl LogSettings {
    fn new(config: &Config, colour: bool, env_filtered: bool) -> Self {
        Self::with_writer(config, colour, env_filtered, StdoutWriter::start())
    }

    fn with_writer(
        config: &Config,
        colour: bool,
        env_filtered: bool,
        stdout: StdoutWriter,
    ) -> Self {
        Self {
            level: AtomicU8::new(level_rank(config.log_level)),
            time_format: Mutex::new(config.log_time_format),
            to_stdout: config.log_to_stdout,
            colour,
            env_filtered,
            held: Mutex::new(Some(Vec::new())),
            stdout,
        }
    }

    /// Writes every stdout line still queued; the binary calls it before it
    /// exits. Lines logged after it are written at once.
    pub fn flush_stdout(&self) {
        self.stdout.flush();
    }

    /// Writes the lines held so far and every later one straight to stdout.
    /// The binary calls it right after its `listening on` line.
    pub fn release_stdout(&self) {
        let held = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        for line in held.into_iter().flatten() {
            self.stdout.write_line(&line);
        }
    }

    /// Writes the line made of `parts` to stdout (or holds it).
    fn write_stdout(&self, parts: &[&str]) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        match held.as_mut() {
            Some(lines) if lines.len() < MAX_HELD => lines.push(parts.concat()),
            Some(_) => {}
            None => {
                drop(held);
                self.stdout.write_parts(parts);
            }
        }
    }

    /// Takes `logLevel` and `logTimeFormat` from a (reloaded) configuration.
    pub fn apply(&self, config: &Config) {
        let old = self
            .level
            .swap(level_rank(config.log_level), Ordering::Relaxed);
        *self
            .time_format
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = config.log_time_format;
        if old != level_rank(config.log_level) {
            // Callsites cache whether they are enabled; make them ask again.
            tracing::callsite::rebuild_interest_cache();
        }
    }

    fn time_format(&self) -> Option<LogTimeFormat> {
        *self
            .time_format
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether an event passes `logLevel`: our own crate's events from the
    /// configured level, other crates' from warnings, upstream output always.
    fn passes(&self, metadata: &Metadata<'_>) -> bool {
        if self.env_filtered || metadata.target() == UPSTREAM_TARGET {
            return true;
        }
        let ours = metadata.target().starts_with("llama_swap_server");
        let floor = if ours {
            self.level.load(Ordering::Relaxed)
        } else {
            2
        };
        event_rank(*metadata.level()) >= floor
    }
}

/// Installs the process's tracing subscriber for `config`: the proxy's log
/// (history + stdout per `logToStdout`). Returns the history and the settings
/// handle for reloads. Lines for stdout are held until
/// [`LogSettings::release_stdout`] (the binary prints its `listening on`
/// line first). Call once; a second call leaves the first in place.
pub fn install(config: &Config) -> (ProxyLog, Arc<LogSettings>) {
    let env_filter = std::env::var_os("RUST_LOG")
        .is_some()
        .then(tracing_subscriber::EnvFilter::from_default_env);
    let settings = Arc::new(LogSettings::new(
        config,
        std::io::stdout().is_terminal(),
        env_filter.is_some(),
    ));
    let log = ProxyLog::new();
    let layer = ProxyLogLayer {
        log: log.clone(),
        settings: Arc::clone(&settings),
    };
    let installed = match env_filter {
        Some(filter) => tracing_subscriber::registry()
            .with(layer.with_filter(filter))
            .try_init(),
        None => tracing_subscriber::registry().with(layer).try_init(),
    };
    if installed.is_err() {
        eprintln!("warning: a tracing subscriber was already installed; the proxy log stays empty");
    }
    (log, settings)
}

/// The tracing layer writing the proxy's log.
#[derive(Debug)]
pub struct ProxyLogLayer {
    log: ProxyLog,
    settings: Arc<LogSettings>,
}

impl ProxyLogLayer {
    /// A layer recording into `log` with `settings` (for embedding in another
    /// subscriber; [`install`] does it for the binary).
    #[must_use]
    pub fn new(log: ProxyLog, settings: Arc<LogSettings>) -> Self {
        Self { log, settings }
    }
}

/// Largest line buffer a thread keeps for its next line.
const MAX_SCRATCH: usize = 64 * 1024;

thread_local! {
    /// The buffer a thread builds its log lines in, kept between lines so
    /// that a line costs one allocation of its exact length (the history's
    /// copy) or none at all (a line for stdout only).
    static SCRATCH: Cell<String> = const { Cell::new(String::new()) };
}

/// The thread's line buffer, empty. A line logged while another is being
/// built (a field's `Debug` that logs) gets a fresh one.
fn take_scratch() -> String {
    SCRATCH.try_with(Cell::take).unwrap_or_default()
}

/// Gives the line buffer back for the thread's next line.
fn keep_scratch(mut line: String) {
    if line.capacity() <= MAX_SCRATCH {
        line.clear();
        // Fails only while the thread exits; the buffer is dropped then.
        let _ = SCRATCH.try_with(|scratch| scratch.set(line));
    }
}

impl<S> Layer<S> for ProxyLogLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(
        &self,
        metadata: &'static Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if self.settings.passes(metadata) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        self.settings.passes(metadata)
    }

    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        let mut fields = SpanFields::new();
        attrs.record(&mut Pairs(&mut fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: Context<'_, S>,
    ) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        // Appended in place: values recorded later are plain ones (the
        // request's `seq`), rendered without logging anything themselves.
        match extensions.get_mut::<SpanFields>() {
            Some(existing) => values.record(&mut Pairs(existing)),
            None => {
                let mut fields = SpanFields::new();
                values.record(&mut Pairs(&mut fields));
                extensions.insert(fields);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let metadata = event.metadata();
        if metadata.target() == UPSTREAM_TARGET {
            if matches!(
                self.settings.to_stdout,
                LogToStdout::Upstream | LogToStdout::Both
            ) {
                let mut line = take_scratch();
                line.push('[');
                let mut model = Model::new(&mut line);
                event.record(&mut model);
                if !model.seen {
                    line.push_str("upstream");
                }
                line.push_str("] ");
                event.record(&mut Message(&mut line));
                self.settings.write_stdout(&[&line]);
                keep_scratch(line);
            }
            return;
        }
        // `[timestamp ][LEVEL] message key=value... span-key=value...`,
        // written once, in order: the message first, whichever field it is.
        let mut line = take_scratch();
        if let Some(format) = self.settings.time_format() {
            write_timestamp(&mut line, format, &jiff::Zoned::now());
            line.push(' ');
        }
        let stamp_len = line.len();
        let level = level_name(*metadata.level());
        line.push('[');
        line.push_str(level);
        line.push_str("] ");
        event.record(&mut Message(&mut line));
        event.record(&mut Pairs(&mut line));
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(span_fields) = span.extensions().get::<SpanFields>() {
                    line.push_str(span_fields.as_str());
                }
            }
        }
        if matches!(
            self.settings.to_stdout,
            LogToStdout::Proxy | LogToStdout::Both
        ) {
            if self.settings.colour {
                // The history's line with the level coloured.
                let after_level = stamp_len + 1 + level.len();
                self.settings.write_stdout(&[
                    &line[..stamp_len],
                    "[\x1b[",
                    level_colour(*metadata.level()),
                    "m",
                    level,
                    "\x1b[0m",
                    &line[after_level..],
                ]);
            } else {
                // Off a terminal the stdout line is the history's line.
                self.settings.write_stdout(&[&line]);
            }
        }
        self.log.record_copy(&line);
        keep_scratch(line);
    }
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::TRACE | Level::DEBUG => "DEBUG",
        Level::INFO => "INFO",
        Level::WARN => "WARN",
        Level::ERROR => "ERROR",
    }
}

/// ANSI SGR colour of a level.
fn level_colour(level: Level) -> &'static str {
    match level {
        Level::TRACE | Level::DEBUG => "34",
        Level::INFO => "32",
        Level::WARN => "33",
        Level::ERROR => "31",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logging::timestamp;

    fn at(text: &str) -> jiff::Zoned {
        text.parse().unwrap()
    }

    #[test]
    fn go_layouts_print_like_go() {
        let utc = at("2026-01-05T15:04:05.120000000+00:00[UTC]");
        let cases = [
            (LogTimeFormat::Ansic, "Mon Jan  5 15:04:05 2026"),
            (LogTimeFormat::UnixDate, "Mon Jan  5 15:04:05 UTC 2026"),
            (LogTimeFormat::RubyDate, "Mon Jan 05 15:04:05 +0000 2026"),
            (LogTimeFormat::Rfc822, "05 Jan 26 15:04 UTC"),
            (LogTimeFormat::Rfc822Z, "05 Jan 26 15:04 +0000"),
            (LogTimeFormat::Rfc850, "Monday, 05-Jan-26 15:04:05 UTC"),
            (LogTimeFormat::Rfc1123, "Mon, 05 Jan 2026 15:04:05 UTC"),
            (LogTimeFormat::Rfc1123Z, "Mon, 05 Jan 2026 15:04:05 +0000"),
            (LogTimeFormat::Rfc3339, "2026-01-05T15:04:05Z"),
            (LogTimeFormat::Rfc3339Nano, "2026-01-05T15:04:05.12Z"),
            (LogTimeFormat::Kitchen, "3:04PM"),
            (LogTimeFormat::Stamp, "Jan  5 15:04:05"),
            (LogTimeFormat::StampMilli, "Jan  5 15:04:05.120"),
            (LogTimeFormat::StampMicro, "Jan  5 15:04:05.120000"),
            (LogTimeFormat::StampNano, "Jan  5 15:04:05.120000000"),
        ];
        for (format, expected) in cases {
            assert_eq!(timestamp(format, &utc), expected, "{}", format.name());
        }
        let nano = |text| timestamp(LogTimeFormat::Rfc3339Nano, &at(text));
        assert_eq!(
            nano("2026-01-05T15:04:05.000000005+00:00[UTC]"),
            "2026-01-05T15:04:05.000000005Z"
        );
        assert_eq!(
            nano("2026-01-05T15:04:05.100200300+00:00[UTC]"),
            "2026-01-05T15:04:05.1002003Z"
        );
        assert_eq!(
            nano("2026-01-05T15:04:05+00:00[UTC]"),
            "2026-01-05T15:04:05Z"
        );
        let east = at("2026-01-05T15:04:05+02:00[+02:00]");
        assert_eq!(
            timestamp(LogTimeFormat::Rfc3339, &east),
            "2026-01-05T15:04:05+02:00"
        );
    }

    #[test]
    fn events_become_lines_with_level_fields_and_span_fields() {
        let config = Config::loader()
            .yaml("t.yaml", "logTimeFormat: rfc3339\n")
            .env(&|_| None)
            .load()
            .unwrap()
            .config;
        let log = ProxyLog::new();
        let settings = Arc::new(LogSettings::new(&config, false, false));
        let layer = ProxyLogLayer::new(log.clone(), Arc::clone(&settings));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request", request_id = "r-1");
            let _entered = span.enter();
            tracing::info!(model = "qwen", status = 200, "served");
            tracing::debug!("hidden at info");
            tracing::warn!(target: "hyper", "a dependency's warning");
            tracing::info!(target: "hyper", "a dependency's chatter");
            tracing::info!(target: UPSTREAM_TARGET, model = "qwen", "upstream text");
        });
        let lines: Vec<String> = log.history().iter().map(|l| l.text.clone()).collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        let (stamp, rest) = lines[0].split_once(' ').unwrap();
        assert!(stamp.ends_with('Z') && stamp.contains('T'), "{stamp}");
        assert_eq!(rest, "[INFO] served model=qwen status=200 request_id=r-1");
        assert!(
            lines[1].ends_with("[WARN] a dependency's warning request_id=r-1"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_reload_changes_the_level() {
        let info = Config::loader()
            .yaml("t.yaml", "")
            .env(&|_| None)
            .load()
            .unwrap()
            .config;
        let debug = Config::loader()
            .yaml("t.yaml", "logLevel: debug\n")
            .env(&|_| None)
            .load()
            .unwrap()
            .config;
        let log = ProxyLog::new();
        let settings = Arc::new(LogSettings::new(&info, false, false));
        let subscriber =
            tracing_subscriber::registry().with(ProxyLogLayer::new(log.clone(), settings.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let emit = || tracing::debug!("detail");
            emit();
            settings.apply(&debug);
            emit();
        });
        let lines: Vec<String> = log.history().iter().map(|l| l.text.clone()).collect();
        assert_eq!(lines, ["[DEBUG] detail"]);
    }

    /// A layer on `yaml`'s settings whose stdout lines stay queued for the
    /// test to read, already released.
    fn queued_layer(yaml: &str, colour: bool) -> (ProxyLog, Arc<LogSettings>, ProxyLogLayer) {
        let config = Config::loader()
            .yaml("t.yaml", yaml)
            .env(&|_| None)
            .load()
            .unwrap()
            .config;
        let log = ProxyLog::new();
        let settings = Arc::new(LogSettings::with_writer(
            &config,
            colour,
            false,
            StdoutWriter::unstarted(),
        ));
        settings.release_stdout();
        let layer = ProxyLogLayer::new(log.clone(), Arc::clone(&settings));
        (log, settings, layer)
    }

    fn texts(log: &ProxyLog) -> Vec<String> {
        log.history().iter().map(|l| l.text.clone()).collect()
    }

    #[test]
    fn an_access_line_renders_every_kind_of_field_exactly() {
        let (log, settings, layer) = queued_layer("logToStdout: proxy\n", false);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            let span = tracing::info_span!(
                "request",
                request_id = %"0123456789abcdef",
                seq = tracing::field::Empty
            );
            let _entered = span.enter();
            span.record("seq", 42u64);
            tracing::info!(
                method = %http::Method::POST,
                path = %"/v1/chat/completions",
                status = 200u16,
                ms = 1.25,
                whole = 2.0,
                delta = -3i64,
                ok = true,
                note = "two words",
                empty = "",
                plain = "word",
                model = "a b",
                list = ?["x", "y"],
                "request"
            );
            tracing::info!(first = 1, message = "the message field named last");
        });
        let expected = [
            "[INFO] request method=POST path=/v1/chat/completions status=200 ms=1.25 \
             whole=2.0 delta=-3 ok=true note=\"two words\" empty=\"\" plain=word model=a b \
             list=[\"x\", \"y\"] request_id=0123456789abcdef seq=42",
            "[INFO] the message field named last first=1 request_id=0123456789abcdef seq=42",
        ];
        assert_eq!(texts(&log), expected);
        // Off a terminal, stdout gets the history's lines as they are.
        assert_eq!(
            settings.stdout.queued(),
            format!("{}\n{}\n", expected[0], expected[1])
        );
    }

    #[test]
    fn a_long_field_value_or_message_is_cut_and_says_how_much_was_left_out() {
        use crate::logging::fields::{MAX_MESSAGE_BYTES, MAX_VALUE_BYTES};
        let (log, _settings, layer) = queued_layer("", false);
        // A client's 64 KiB path, with a multi-byte character across the cut.
        let path = format!(
            "/{}é{}",
            "a".repeat(MAX_VALUE_BYTES - 2),
            "b".repeat(64 * 1024)
        );
        let message = "m".repeat(MAX_MESSAGE_BYTES + 10);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            tracing::info!(path = %path, status = 404u16, "request");
            tracing::info!("{message}");
        });
        let lines = texts(&log);
        let kept = &path[..MAX_VALUE_BYTES - 1];
        let cut = path.len() - kept.len();
        assert_eq!(
            lines[0],
            format!("[INFO] request path={kept}...[{cut} more bytes] status=404")
        );
        assert_eq!(
            lines[1],
            format!("[INFO] {}...[10 more bytes]", &message[..MAX_MESSAGE_BYTES])
        );
    }

    #[test]
    fn on_a_terminal_only_the_level_is_coloured() {
        let (log, settings, layer) =
            queued_layer("logToStdout: proxy\nlogTimeFormat: rfc3339\n", true);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            tracing::info!(status = 200, "served");
            tracing::warn!("slow");
        });
        let lines = texts(&log);
        assert_eq!(lines.len(), 2, "{lines:?}");
        let coloured = format!(
            "{}\n{}\n",
            lines[0].replacen("[INFO]", "[\x1b[32mINFO\x1b[0m]", 1),
            lines[1].replacen("[WARN]", "[\x1b[33mWARN\x1b[0m]", 1)
        );
        assert!(
            lines[0].ends_with("Z [INFO] served status=200"),
            "{lines:?}"
        );
        assert_eq!(settings.stdout.queued(), coloured);
    }

    #[test]
    fn upstream_output_reaches_stdout_as_model_and_text_only() {
        let (log, settings, layer) = queued_layer("logToStdout: both\n", true);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            tracing::info!(target: UPSTREAM_TARGET, model = %"qwen", stream = "stdout", "loaded {}", 7);
            tracing::info!(target: UPSTREAM_TARGET, model = ?"quoted", "text");
            tracing::info!(target: UPSTREAM_TARGET, "nameless");
            tracing::info!(target: UPSTREAM_TARGET, model = "", "empty name");
        });
        assert!(
            texts(&log).is_empty(),
            "upstream output is not the proxy's history"
        );
        assert_eq!(
            settings.stdout.queued(),
            "[qwen] loaded 7\n[quoted] text\n[upstream] nameless\n[] empty name\n"
        );
    }

    #[test]
    fn lines_logged_before_the_release_wait_for_it_in_order() {
        let config = Config::loader()
            .yaml("t.yaml", "logToStdout: both\n")
            .env(&|_| None)
            .load()
            .unwrap()
            .config;
        let log = ProxyLog::new();
        let settings = Arc::new(LogSettings::with_writer(
            &config,
            true,
            false,
            StdoutWriter::unstarted(),
        ));
        let layer = ProxyLogLayer::new(log.clone(), Arc::clone(&settings));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            tracing::info!("early");
            tracing::info!(target: UPSTREAM_TARGET, model = "m", "out");
            assert_eq!(settings.stdout.queued(), "", "held until the release");
            settings.release_stdout();
            tracing::info!("late");
        });
        assert_eq!(
            settings.stdout.queued(),
            "[\x1b[32mINFO\x1b[0m] early\n[m] out\n[\x1b[32mINFO\x1b[0m] late\n"
        );
    }
}
