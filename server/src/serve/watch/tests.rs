//! The watcher's loop on a paused clock, with sources that stand in for the
//! files; and the file sources' version and names.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::*;

/// A configuration with models `ids`, each with a `${PORT}`.
fn config(ids: &[&str]) -> Config {
    let mut yaml = String::from("models:\n");
    for id in ids {
        yaml.push_str(&format!("  {id}:\n    cmd: server --port ${{PORT}}\n"));
    }
    Config::loader()
        .yaml("test.yaml", &yaml)
        .env(&|_| None)
        .load()
        .expect("the test configuration loads")
        .config
}

/// What the stand-in was asked.
#[derive(Debug, PartialEq)]
enum Asked {
    Version,
    Load,
}

#[derive(Default)]
struct Script {
    version: u32,
    version_fails: bool,
    load_fails: bool,
    load_hangs: bool,
    /// The configuration each load returns, by the models it names.
    next: Vec<&'static str>,
    /// The ports each load was asked to keep.
    kept: Vec<KeptPorts>,
}

/// Sources whose version and configuration the test sets, reporting each
/// call on a channel so the test can wait for it.
struct Fake {
    script: Arc<Mutex<Script>>,
    asked: UnboundedSender<Asked>,
}

impl Sources for Fake {
    type Version = u32;

    fn describe(&self) -> String {
        "fake".to_owned()
    }

    async fn version(&mut self) -> Option<u32> {
        let _ = self.asked.send(Asked::Version);
        let script = self.script.lock().unwrap();
        (!script.version_fails).then_some(script.version)
    }

    async fn load(&mut self, kept: &KeptPorts) -> Option<Config> {
        let _ = self.asked.send(Asked::Load);
        let (hangs, fails, ids) = {
            let mut script = self.script.lock().unwrap();
            script.kept.push(kept.clone());
            (script.load_hangs, script.load_fails, script.next.clone())
        };
        if hangs {
            std::future::pending::<()>().await;
        }
        (!fails).then(|| config(&ids))
    }
}

/// A watch running on its own task, and the test's ends of it.
struct Running {
    script: Arc<Mutex<Script>>,
    asked: UnboundedReceiver<Asked>,
    reloads: mpsc::Receiver<Config>,
    hangup: mpsc::Sender<()>,
    stop: CancellationToken,
    task: JoinHandle<()>,
    started: Instant,
}

impl Running {
    /// Watches sources at version 0 that were loaded into `running`.
    fn start(poll: Option<Duration>, running: &Config) -> Self {
        let script = Arc::new(Mutex::new(Script {
            next: vec!["a"],
            ..Script::default()
        }));
        let (asked_tx, asked) = unbounded_channel();
        let (reloads_tx, reloads) = mpsc::channel(1);
        let (hangup, hangups) = mpsc::channel(1);
        let stop = CancellationToken::new();
        let watch = Watch {
            seen: 0,
            kept: KeptPorts::of(running),
            poll,
        };
        let sources = Fake {
            script: Arc::clone(&script),
            asked: asked_tx,
        };
        let task = tokio::spawn(watch.run(sources, Some(hangups), reloads_tx, stop.clone()));
        Self {
            script,
            asked,
            reloads,
            hangup,
            stop,
            task,
            started: Instant::now(),
        }
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap()
    }

    async fn next_asked(&mut self) -> Asked {
        self.asked.recv().await.expect("the watch is running")
    }

    /// Waits for the next look at the version, skipping loads.
    async fn next_look(&mut self) {
        while self.next_asked().await != Asked::Version {}
    }

    async fn next_reload(&mut self) -> Config {
        self.reloads.recv().await.expect("a configuration is sent")
    }

    fn nothing_sent(&mut self) -> bool {
        matches!(self.reloads.try_recv(), Err(TryRecvError::Empty))
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task.await.expect("the watch ends without panicking");
    }
}

#[tokio::test(start_paused = true)]
async fn polling_reloads_a_change_once_at_the_next_look() {
    let mut w = Running::start(Some(WATCH_INTERVAL), &config(&["a"]));
    // The first look is at once, and nothing has changed.
    w.next_look().await;
    w.script().version = 1;
    w.script().next = vec!["a", "b"];

    let reloaded = w.next_reload().await;

    assert!(reloaded.model("b").is_some());
    assert_eq!(w.started.elapsed(), WATCH_INTERVAL);
    // The next two looks find the version already loaded.
    w.next_look().await;
    w.next_look().await;
    assert!(w.nothing_sent());
    assert_eq!(w.script().kept.len(), 1);
    w.stop().await;
}

#[tokio::test(start_paused = true)]
async fn sighup_reloads_unchanged_sources_and_the_version_it_saw_is_not_reloaded_again() {
    let mut w = Running::start(Some(WATCH_INTERVAL), &config(&["a"]));
    w.next_look().await;
    w.script().version = 1;
    w.hangup.send(()).await.unwrap();

    w.next_reload().await;
    assert_eq!(w.started.elapsed(), Duration::ZERO);
    // Polling sees version 1 as loaded.
    w.next_look().await;
    w.next_look().await;
    assert!(w.nothing_sent());

    // Unchanged sources reload on SIGHUP all the same.
    w.hangup.send(()).await.unwrap();
    w.next_reload().await;
    assert_eq!(w.script().kept.len(), 2);
    w.stop().await;
}

#[tokio::test(start_paused = true)]
async fn without_polling_only_a_sighup_reloads() {
    let mut w = Running::start(None, &config(&["a"]));
    w.script().version = 1;

    // A minute of the paused clock: thirty looks' worth, and none taken.
    tokio::time::sleep(30 * WATCH_INTERVAL).await;
    assert!(w.nothing_sent());
    assert!(matches!(w.asked.try_recv(), Err(TryRecvError::Empty)));

    w.hangup.send(()).await.unwrap();
    w.next_reload().await;
    w.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_load_that_fails_is_not_sent_and_the_next_change_reloads() {
    let mut w = Running::start(Some(WATCH_INTERVAL), &config(&["a"]));
    w.next_look().await;
    {
        let mut script = w.script();
        script.version = 1;
        script.load_fails = true;
    }
    w.next_look().await;
    assert_eq!(w.next_asked().await, Asked::Load);
    // The look after the failed load: had it been sent, it would be here.
    w.next_look().await;
    assert!(w.nothing_sent());

    {
        let mut script = w.script();
        script.version = 2;
        script.load_fails = false;
        script.next = vec!["a", "c"];
    }
    let reloaded = w.next_reload().await;
    assert!(reloaded.model("c").is_some());
    w.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_version_that_cannot_be_read_reloads_nothing() {
    let mut w = Running::start(Some(WATCH_INTERVAL), &config(&["a"]));
    w.next_look().await;
    {
        let mut script = w.script();
        script.version = 1;
        script.version_fails = true;
    }
    w.next_look().await;
    w.next_look().await;
    assert!(w.nothing_sent());
    assert!(w.script().kept.is_empty());

    w.script().version_fails = false;
    w.next_reload().await;
    w.stop().await;
}

#[tokio::test(start_paused = true)]
async fn each_load_keeps_the_ports_of_the_configuration_sent_last() {
    let running = config(&["a", "b"]);
    let mut w = Running::start(Some(WATCH_INTERVAL), &running);
    w.next_look().await;
    w.script().version = 1;
    w.script().next = vec!["c"];
    let first = w.next_reload().await;
    w.script().version = 2;
    w.next_reload().await;

    let kept = std::mem::take(&mut w.script().kept);
    assert_eq!(
        kept,
        [
            KeptPorts::of(&running),
            KeptPorts::of(&running).then(KeptPorts::of(&first)),
        ]
    );
    w.stop().await;
}

#[tokio::test(start_paused = true)]
async fn stopping_ends_the_watch_while_a_load_hangs() {
    let mut w = Running::start(Some(WATCH_INTERVAL), &config(&["a"]));
    w.next_look().await;
    {
        let mut script = w.script();
        script.version = 1;
        script.load_hangs = true;
    }
    w.next_look().await;
    assert_eq!(w.next_asked().await, Asked::Load);

    w.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_watch_ends_when_the_server_is_gone() {
    let mut w = Running::start(Some(WATCH_INTERVAL), &config(&["a"]));
    w.next_look().await;
    w.reloads.close();
    w.script().version = 1;

    (&mut w.task)
        .await
        .expect("the watch ends without panicking");
}

#[test]
fn the_file_version_follows_the_directorys_list_of_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, "models: {}\n").unwrap();
    let more = dir.path().join("more");
    std::fs::create_dir(&more).unwrap();
    std::fs::write(more.join("a.yaml"), "models: {}\n").unwrap();
    let sources = ConfigSources::new().file(&file).dir(&more);
    let before = sources.version();

    std::fs::write(more.join("b.yml"), "models: {}\n").unwrap();
    let after = sources.version();

    assert_ne!(before, after);
    assert_eq!(after, sources.version());
    let paths: Vec<PathBuf> = after.0.iter().map(|(path, _)| path.clone()).collect();
    assert_eq!(
        paths,
        [file.clone(), more.join("a.yaml"), more.join("b.yml")]
    );
    assert_eq!(
        sources.describe(),
        format!("{} + {}", file.display(), more.display())
    );
}

#[test]
fn the_file_version_follows_a_files_size_and_a_missing_file_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, "models: {}\n").unwrap();
    let sources = ConfigSources::new().file(&file);
    let before = sources.version();

    std::fs::write(&file, "models: {}\n# grown\n").unwrap();
    let grown = sources.version();
    std::fs::remove_file(&file).unwrap();
    let gone = sources.version();

    assert_ne!(before, grown);
    assert_eq!(gone.0, [(file, None)]);
}
