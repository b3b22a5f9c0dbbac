//! Service binaries as processes for the cluster tests: finding them, starting them with
//! a test's environment, `trawl submit --wait`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Service processes, killed when dropped (a failed test leaves none behind).
pub struct Services(pub Vec<(String, Child)>);

impl Drop for Services {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
        }
    }
}

/// The binaries the cluster tests run.
pub const NAMES: [&str; 6] = [
    "trawl",
    "trawl-frontier",
    "trawl-fetcher",
    "trawl-extractor",
    "trawl-indexer",
    "trawl-notifier",
];

/// The binaries, in the order of [`NAMES`]; `None` (with a message) when the servers or
/// the binaries are missing.
pub fn service_bins() -> Option<Vec<PathBuf>> {
    if !crate::services_up() {
        return None;
    }
    let paths = NAMES
        .iter()
        .map(|n| crate::bin(n))
        .collect::<Option<Vec<_>>>();
    if paths.is_none() {
        // The test command builds them (each service package has a test of its binary);
        // there, a missing binary is a failure, not a skip.
        if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
            panic!("the service binaries are not built (cargo test --workspace builds them)");
        }
        eprintln!(
            "SKIPPED: the service binaries are not built (cargo test --workspace builds them)"
        );
    }
    paths
}

/// `trawl submit ARGS... --wait` in the background; the handle yields the drained crawl's
/// report once the command has succeeded.
pub fn submit_wait(
    trawl: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> tokio::task::JoinHandle<serde_json::Value> {
    let mut c = Command::new(trawl);
    c.arg("submit")
        .args(args)
        .args(["--wait", "--wait-timeout", "120"])
        .env("TRAWL_LOG", "warn");
    for (k, v) in env {
        c.env(k, v);
    }
    tokio::task::spawn_blocking(move || {
        let done = c.output().unwrap();
        assert!(
            done.status.success(),
            "{}",
            String::from_utf8_lossy(&done.stderr)
        );
        let stdout = String::from_utf8_lossy(&done.stdout);
        serde_json::from_str(stdout.split_once('\n').unwrap().1).unwrap()
    })
}

/// Starts one service process with the test's environment.
pub fn spawn(path: &PathBuf, env: &[(&str, String)], port: u16) -> Child {
    let mut c = Command::new(path);
    for (k, v) in env {
        c.env(k, v);
    }
    c.env("TRAWL_METRICS_ADDR", format!("127.0.0.1:{port}"))
        .env("TRAWL_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A server process the test started, once it takes connections on `port` (5 s at most);
/// `None` if it never does.
pub fn listening(child: Child, port: u16) -> Option<Child> {
    for _ in 0..250 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(child);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    None
}
