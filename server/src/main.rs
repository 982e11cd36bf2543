//! The `llama-swap-server` binary.
//!
//! Exit codes: 0 success, 2 invalid configuration or invalid command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use llama_swap_server::config::{Config, ConfigError, Loaded};

/// A priority-aware model-swapping proxy that runs llama-swap configurations.
#[derive(Debug, Parser)]
#[command(name = "llama-swap-server", version, about)]
struct Cli {
    /// llama-swap YAML configuration file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,

    /// Validate the configuration, print the resolved models, groups and scheduler,
    /// and exit (0 when valid, 2 when not).
    #[arg(long)]
    check_config: bool,
}

/// Exit status for an unusable configuration, the same as clap's for bad arguments.
const EXIT_INVALID: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let loaded = match Config::load(&cli.config) {
        Ok(loaded) => loaded,
        Err(err) => return report_invalid(&err),
    };
    print_warnings(&cli.config, &loaded);
    if cli.check_config {
        println!(
            "configuration OK: {} ({} warning{})",
            cli.config.display(),
            loaded.warnings.len(),
            if loaded.warnings.len() == 1 { "" } else { "s" }
        );
        print!("{}", loaded.config.summary());
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "llama-swap-server: serving is not available in this build yet; \
         run with --check-config to validate {}",
        cli.config.display()
    );
    ExitCode::from(EXIT_INVALID)
}

/// Prints warnings as `warning: file: key.path: message`, like the errors.
fn print_warnings(file: &Path, loaded: &Loaded) {
    for warning in &loaded.warnings {
        eprintln!("warning: {}: {warning}", file.display());
    }
}

fn report_invalid(err: &ConfigError) -> ExitCode {
    let issues = err.issues();
    if issues.is_empty() {
        eprintln!("error: {err}");
    } else {
        for line in err.to_string().lines() {
            eprintln!("error: {line}");
        }
        eprintln!(
            "configuration invalid: {} problem{}",
            issues.len(),
            if issues.len() == 1 { "" } else { "s" }
        );
    }
    ExitCode::from(EXIT_INVALID)
}
