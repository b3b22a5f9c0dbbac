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
pub const NAMES: [&str; 9] = [
    "trawl",
    "trawl-frontier",
    "trawl-fetcher",
    "trawl-extractor",
    "trawl-indexer",
    "trawl-notifier",
    "trawl-renderer",
    "trawl-refiner",
    "trawl-ingester",
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
        .args(["--wait", "--wait-timeout"])
        // Room for a crawl slowed by the faults a test makes on a busy 2-core machine (a
        // Redis held still for a while drained 6,645 of ~7,000 pages in 120 s once);
        // longer for the benchmarks that run the tests' crawls at scale (`bench/faults`).
        .arg(std::env::var("TRAWL_TEST_WAIT_S").unwrap_or_else(|_| "240".into()))
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
        .stderr(Stdio::null());
    // A test's service logs, for a person looking into a failure: TRAWL_TEST_LOG_DIR.
    if let Some(dir) = std::env::var_os("TRAWL_TEST_LOG_DIR") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let log =
            std::fs::File::create(Path::new(&dir).join(format!("{name}-{port}.log"))).unwrap();
        c.stderr(log).env("TRAWL_LOG", "info");
    }
    c.spawn().unwrap()
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

/// One crawl's four stage services (frontier, fetcher, extractor, indexer) over the shared
/// NATS and Redis, under a crawl id and queue prefix of its own, writing to its own
/// directory.
pub struct Stack {
    pub crawl: String,
    pub prefix: String,
    pub out: tempfile::TempDir,
    pub services: Services,
    /// Each service's metrics port (`/healthz`, `/readyz`, `/metrics`), in start order.
    pub ports: Vec<u16>,
    trawl: PathBuf,
    paths: Vec<PathBuf>,
    /// The index in [`NAMES`] of each service, in start order.
    stages: Vec<usize>,
    env: Vec<(&'static str, String)>,
}

impl Stack {
    /// Starts the stages with the stack's names, two workers each, and `extra` variables.
    pub fn start(paths: &[PathBuf], extra: &[(&'static str, &str)]) -> Stack {
        Self::start_services(paths, &[1, 2, 3, 4], extra)
    }

    /// Starts the services named by their index in [`NAMES`] (one process each, in this
    /// order), with the stack's names and `extra` variables.
    pub fn start_services(
        paths: &[PathBuf],
        stages: &[usize],
        extra: &[(&'static str, &str)],
    ) -> Stack {
        let tag = uuid::Uuid::new_v4().simple().to_string();
        let (crawl, prefix) = (format!("s{}", &tag[..10]), format!("q{}", &tag[..10]));
        let out = tempfile::tempdir().unwrap();
        let mut env: Vec<(&'static str, String)> = vec![
            ("TRAWL_CRAWL", crawl.clone()),
            ("TRAWL_QUEUE_PREFIX", prefix.clone()),
            ("TRAWL_OUT", out.path().display().to_string()),
            ("TRAWL_CONCURRENCY", "2".into()),
        ];
        env.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        let mut services = Services(Vec::new());
        let mut ports = Vec::new();
        for &stage in stages {
            let port = free_port();
            let c = spawn(&paths[stage], &env, port);
            services.0.push((NAMES[stage].to_string(), c));
            ports.push(port);
        }
        Stack {
            crawl,
            prefix,
            out,
            services,
            ports,
            trawl: paths[0].clone(),
            paths: paths.to_vec(),
            stages: stages.to_vec(),
            env,
        }
    }

    /// Kills the service at `i` (in start order; by default 0: frontier, 1: fetcher,
    /// 2: extractor, 3: indexer) with SIGKILL and starts it again.
    pub fn kill_and_restart(&mut self, i: usize) {
        let (_, c) = &mut self.services.0[i];
        let _ = c.kill();
        let _ = c.wait();
        self.ports[i] = free_port();
        *c = spawn(&self.paths[self.stages[i]], &self.env, self.ports[i]);
    }

    /// `trawl submit ARGS... --wait` for the stack's crawl, started now; the handle yields
    /// its drained status.
    pub fn submit(&self, args: &[&str]) -> tokio::task::JoinHandle<serde_json::Value> {
        let mut env = vec![
            ("TRAWL_CRAWL", self.crawl.as_str()),
            ("TRAWL_QUEUE_PREFIX", self.prefix.as_str()),
        ];
        // The servers the stack was started against, when they are not the shared ones,
        // and the settings that shape its streams: `submit` creates a stream the services
        // have not yet, and a stream made with another ack wait is another configuration.
        for key in [
            "TRAWL_NATS_URL",
            "TRAWL_REDIS_URL",
            "TRAWL_REDIS_STATE_URLS",
            "TRAWL_ACK_WAIT_S",
            "TRAWL_MAX_DELIVER",
            "TRAWL_STREAM_REPLICAS",
        ] {
            if let Some(v) = self.var(key) {
                env.push((key, v));
            }
        }
        submit_wait(&self.trawl, args, &env)
    }

    /// The stack's own variables (crawl id, queue prefix, servers) for a command of the test's.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        self.env.clone()
    }

    fn var(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Stops the services and removes the crawl's keys.
    pub async fn stop(mut self) {
        for (_, c) in &mut self.services.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
        let redis = self
            .var("TRAWL_REDIS_URL")
            .unwrap_or("redis://127.0.0.1:6379");
        crate::cleanup(&self.prefix, &self.crawl, Some(redis)).await;
    }
}
