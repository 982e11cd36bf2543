//! Finding processes a test started, to prove none outlives the server.

use std::path::Path;

/// A live process found in `/proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Process ID.
    pub pid: u32,
    /// Its command line, arguments joined by spaces.
    pub cmdline: String,
}

/// Live processes running `binary` whose command line names one of `ports`
/// (`127.0.0.1:<port>` or `--port <port>`), so that processes of tests running
/// in parallel are not counted.
pub fn listening_on(binary: &Path, ports: &[u16]) -> Vec<Process> {
    let name = binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The trailing space keeps port 4000 from matching 40001.
    let needles: Vec<String> = ports
        .iter()
        .flat_map(|p| [format!("127.0.0.1:{p} "), format!("--port {p} ")])
        .collect();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        // A zombie has an empty command line, so whatever matches is alive.
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if cmdline.contains(name.as_str()) && needles.iter().any(|n| cmdline.contains(n.as_str())) {
            found.push(Process { pid, cmdline });
        }
    }
    found
}
