//! The processes a benchmark runs against: mockswap upstreams, llama-swap-server,
//! nginx and the bare hyper proxy. Each is a child owned by a guard that stops it (SIGTERM, then SIGKILL) and
//! reaps it, so a failed benchmark leaves nothing behind.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::Res;

/// How long a child may take to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Where the release binaries live (the bench binary sits in `target/release/deps`).
pub(crate) fn bin_dir() -> Res<PathBuf> {
    let exe = std::env::current_exe()?;
    let deps = exe.parent().ok_or("bench binary has no directory")?;
    let dir = if deps.ends_with("deps") {
        deps.parent().ok_or("deps has no parent")?
    } else {
        deps
    };
    Ok(dir.to_path_buf())
}

/// A port that was free a moment ago (for programs that cannot report the one they bound).
pub(crate) fn free_port() -> Res<u16> {
    let listener = StdListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// A child process stopped and reaped on [`Proc::stop`] or, as a last resort, killed on drop.
pub(crate) struct Proc {
    child: Child,
    name: &'static str,
    /// Reads the child's stdout after its first line, so it never blocks on the pipe.
    drain: Option<JoinHandle<()>>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(drain) = &self.drain {
            drain.abort();
        }
    }
}

impl Proc {
    /// The process id.
    pub(crate) fn pid(&self) -> Res<u32> {
        self.child
            .id()
            .ok_or_else(|| format!("{} already exited", self.name).into())
    }

    /// Resident set size in bytes, from `/proc/<pid>/status` (VmRSS).
    pub(crate) fn rss_bytes(&self) -> Res<u64> {
        rss_bytes(self.pid()?)
    }

    /// SIGTERM, wait up to the grace period, then SIGKILL; always reaps.
    pub(crate) async fn stop(mut self) -> Res<()> {
        if let Some(pid) = self.child.id() {
            let pid = Pid::from_raw(i32::try_from(pid)?);
            let _ = kill(pid, Signal::SIGTERM);
            if tokio::time::timeout(STOP_GRACE, self.child.wait())
                .await
                .is_ok()
            {
                return Ok(());
            }
            eprintln!(
                "{} ignored SIGTERM for {STOP_GRACE:?}; killing it",
                self.name
            );
        }
        self.child.kill().await?;
        Ok(())
    }
}

/// Resident set size in bytes of any process.
pub(crate) fn rss_bytes(pid: u32) -> Res<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .ok_or("no VmRSS line")?;
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib * 1024)
}

/// Starts `command` with stdout piped, reads its first line, `listening on http://ADDR`
/// (the contract of mockswap, llama-swap-server and bare-hyper-proxy), and keeps
/// draining stdout so the child never blocks on a full pipe. stderr goes to `log`.
async fn announced(
    name: &'static str,
    mut command: Command,
    log: Option<&Path>,
) -> Res<(Proc, SocketAddr)> {
    let stderr = match log {
        Some(path) => Stdio::from(std::fs::File::create(path)?),
        None => Stdio::null(),
    };
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or("stdout not piped")?;
    let mut proc = Proc {
        child,
        name,
        drain: None,
    };
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .map_err(|_| format!("{name} printed nothing for 20 s"))??;
    let Some(first) = first else {
        let status = proc.child.wait().await?;
        return Err(format!("{name} exited ({status}) before printing its address").into());
    };
    let addr = first
        .strip_prefix("listening on http://")
        .ok_or_else(|| format!("unexpected first line from {name}: {first}"))?
        .parse()?;
    proc.drain = Some(tokio::spawn(async move {
        while let Ok(Some(_)) = lines.next_line().await {}
    }));
    Ok((proc, addr))
}

/// Starts `mockswap` with `args` and returns it with the address it bound.
pub(crate) async fn mockswap(bin: &Path, args: &[String]) -> Res<(Proc, SocketAddr)> {
    let mut command = Command::new(bin.join("mockswap"));
    command
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env("MOCKSWAP_LOG", "warn");
    announced("mockswap", command, None).await
}

/// The floor reference's binary name (benches/budget/bare_proxy.rs).
pub(crate) const BARE_PROXY: &str = "bare-hyper-proxy";

/// Starts `bare-hyper-proxy` in front of `upstream` and returns it with the address it
/// bound.
pub(crate) async fn bare_proxy(bin: &Path, upstream: SocketAddr) -> Res<(Proc, SocketAddr)> {
    let path = bin.join(BARE_PROXY);
    if !path.is_file() {
        return Err(format!(
            "{} is missing: run `cargo build --release -p llama-swap-suite --bins` (scripts/bench does)",
            path.display()
        )
        .into());
    }
    let mut command = Command::new(path);
    command
        .args(["--listen", "127.0.0.1:0", "--upstream"])
        .arg(upstream.to_string());
    announced(BARE_PROXY, command, None).await
}

/// Starts a program that listens on `addr` (given on its command line) and waits until
/// that port accepts connections.
pub(crate) async fn listening(
    name: &'static str,
    mut command: Command,
    addr: SocketAddr,
    log: &Path,
) -> Res<Proc> {
    let log = std::fs::File::create(log)?;
    let child = command
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    let mut proc = Proc {
        child,
        name,
        drain: None,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if TcpStream::connect(addr).await.is_ok() {
            return Ok(proc);
        }
        if let Some(status) = proc.child.try_wait()? {
            return Err(format!("{name} exited with {status} before listening on {addr}").into());
        }
        if Instant::now() > deadline {
            return Err(format!("{name} did not listen on {addr} within 20 s").into());
        }
        // A benchmark harness polling for a port it cannot be told about: nothing to await.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The variable naming a llama-swap-server binary to run instead of the one in the
/// harness's directory (an A/B of two builds with the same harness).
pub(crate) const SERVER_ENV: &str = "BENCH_SERVER";

/// The llama-swap-server binary the harness runs: [`SERVER_ENV`] or `bin`'s.
pub(crate) fn server_binary(bin: &Path) -> PathBuf {
    std::env::var_os(SERVER_ENV).map_or_else(|| bin.join("llama-swap-server"), PathBuf::from)
}

/// Starts llama-swap-server with the YAML `config` written into `dir`, logging
/// warnings only (`RUST_LOG=warn`).
pub(crate) async fn server(bin: &Path, dir: &Path, config: &str) -> Res<(Proc, SocketAddr)> {
    server_logging(bin, dir, config, Some("warn")).await
}

/// As [`server`], with `RUST_LOG` set to `rust_log`, or unset (the default log:
/// an access line per request on stdout, which the harness reads and drops).
pub(crate) async fn server_logging(
    bin: &Path,
    dir: &Path,
    config: &str,
    rust_log: Option<&str>,
) -> Res<(Proc, SocketAddr)> {
    let path = dir.join("config.yaml");
    std::fs::write(&path, config)?;
    let mut command = Command::new(server_binary(bin));
    command
        .arg("--config")
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("RUST_LOG")
        .env("MOCKSWAP_LOG", "warn");
    if let Some(filter) = rust_log {
        command.env("RUST_LOG", filter);
    }
    announced("llama-swap-server", command, Some(&dir.join("server.log"))).await
}

/// The first of `count` consecutive free ports below the kernel's ephemeral range (from
/// 32768), so upstream ports cannot collide with the local ends of client connections.
pub(crate) fn upstream_ports(count: u16) -> Res<u16> {
    let seed = u64::from(std::process::id()) ^ u64::from(free_port()?);
    let mut next = seed;
    for _ in 0..1000 {
        // A small LCG is plenty to spread the attempts.
        next = next
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let start = 20_000 + u16::try_from((next >> 33) % 12_000)?;
        if (start..start + count).all(|port| StdListener::bind(("127.0.0.1", port)).is_ok()) {
            return Ok(start);
        }
    }
    Err(format!("no {count} consecutive free ports in 20000..32000").into())
}

/// A llama-swap config: one entry per `(model, mockswap args)`, extra top-level YAML first.
pub(crate) fn server_config(bin: &Path, extra: &str, models: &[(&str, String)]) -> Res<String> {
    let mut yaml = format!(
        "healthCheckTimeout: 60\nstartPort: {}\n{extra}\nmodels:\n",
        upstream_ports(16)?
    );
    for (model, args) in models {
        yaml.push_str(&format!(
            "  {model}:\n    cmd: {} --listen 127.0.0.1:${{PORT}} {args}\n    proxy: http://127.0.0.1:${{PORT}}\n",
            bin.join("mockswap").display()
        ));
    }
    Ok(yaml)
}
