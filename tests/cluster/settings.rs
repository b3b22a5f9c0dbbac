//! One settings model as a user meets it: the layers reach the flags' defaults, `trawl
//! submit` refuses what a cluster crawl cannot honour, a running crawl is not replaced by
//! accident, and the command reaches a NATS server that wants credentials.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{bin, cleanup, services_up};

fn trawl() -> Command {
    let bin = bin("trawl").expect("the trawl binary is built");
    let mut c = Command::new(bin);
    // The test's own settings only: nothing from the environment it runs in.
    for (k, _) in std::env::vars() {
        if k.starts_with("TRAWL_") {
            c.env_remove(k);
        }
    }
    c.env("TRAWL_LOG", "warn");
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A flag's entry in `--help`: its line and the lines of its description.
fn help_entry(help: &Output, flag: &str) -> String {
    String::from_utf8_lossy(&help.stdout)
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(flag))
        .take(8)
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn layers_give_the_flags_their_defaults() {
    // The environment over the built-in default, shown by --help and used by the parse.
    let help = trawl()
        .args(["crawl", "--help"])
        .env("TRAWL_MAX_DEPTH", "7")
        .output()
        .unwrap();
    assert!(help.status.success(), "{}", stderr(&help));
    let entry = help_entry(&help, "--max-depth");
    assert!(entry.contains("[default: 7]"), "{entry}");
    let entry = help_entry(&help, "--delay");
    assert!(entry.contains("[default: 500]"), "{entry}");

    // A file under the environment, the environment under the flags.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trawl.json");
    std::fs::write(&file, r#"{"delay_ms": 123, "crawl": {"max_pages": 9}}"#).unwrap();
    let help = trawl()
        .args(["crawl", "--help", "--config"])
        .arg(&file)
        .env("TRAWL_MAX_PAGES", "11")
        .output()
        .unwrap();
    let entry = help_entry(&help, "--delay");
    assert!(entry.contains("[default: 123]"), "{entry}");
    let entry = help_entry(&help, "--max-pages ");
    assert!(entry.contains("[default: 11]"), "{entry}");

    // Bad values name where they came from, before anything runs.
    let bad = trawl()
        .args(["crawl", "http://127.0.0.1:1/"])
        .env("TRAWL_DELAY_MS", "soon")
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("TRAWL_DELAY_MS"), "{}", stderr(&bad));
    // ... but only for the commands whose flags are settings.
    let version = trawl()
        .arg("--version")
        .env("TRAWL_DELAY_MS", "soon")
        .output()
        .unwrap();
    assert!(version.status.success(), "{}", stderr(&version));
    let export = trawl()
        .args(["export", "--from", "/nonexistent"])
        .env("TRAWL_OUT", "/tmp")
        .output()
        .unwrap();
    assert!(!export.status.success());
    assert!(
        stderr(&export).contains("--out"),
        "export's --out is its own, required flag: {}",
        stderr(&export)
    );
    std::fs::write(&file, r#"{"delay": 5}"#).unwrap();
    let bad = trawl()
        .args(["crawl", "http://127.0.0.1:1/", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = stderr(&bad);
    assert!(
        err.contains("trawl.json") && err.contains("unknown setting \"delay\""),
        "{err}"
    );
}

#[test]
fn secrets_in_the_layers_are_used_but_not_shown() {
    let help = trawl()
        .args(["submit", "--help"])
        .env("TRAWL_NATS_PASSWORD", "hunter2-pass")
        .env("TRAWL_REDIS_URL", "redis://u:sesame-pass@127.0.0.1:6379")
        .output()
        .unwrap();
    assert!(help.status.success(), "{}", stderr(&help));
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("--nats-password"), "{text}");
    assert!(
        !text.contains("hunter2-pass") && !text.contains("sesame-pass"),
        "{text}"
    );
}

#[test]
fn submit_refuses_what_a_cluster_crawl_cannot_honour() {
    // An address nothing listens on: a refusal must come before any connection.
    let nowhere = [
        "--nats-url",
        "nats://127.0.0.1:1",
        "--redis-url",
        "redis://127.0.0.1:1",
    ];
    let cases: [(&[&str], &str); 7] = [
        (&["--concurrency", "4"], "TRAWL_CONCURRENCY"),
        (&["--out", "/tmp/x"], "TRAWL_OUT"),
        (&["--no-index"], "TRAWL_INDEX_URI"),
        (&["--index", "/tmp/ix"], "TRAWL_INDEX_URI"),
        (&["--no-embed"], "TRAWL_EMBED"),
        (&["--model-dir", "/tmp/m"], "TRAWL_MODEL_DIR"),
        (&["--boilerplate-min-pages", "3"], "one extractor"),
    ];
    for (flags, hint) in cases {
        let out = trawl()
            .arg("submit")
            .arg("http://127.0.0.1:1/")
            .args(flags)
            .args(nowhere)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flags:?} was accepted");
        let err = stderr(&out);
        assert!(
            err.contains(flags[0]) && err.contains("no meaning") && err.contains(hint),
            "{flags:?}: {err}"
        );
    }
    // Everything a crawl itself has is accepted (it then fails on the missing server).
    let out = trawl()
        .args([
            "submit",
            "http://127.0.0.1:1/",
            "--no-warc",
            "--warc-max-bytes",
            "4096",
        ])
        .args(["--chunk-tokens", "128", "--no-dedup", "--max-pages", "3"])
        .args(nowhere)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("NATS at nats://127.0.0.1:1"), "{err}");
}

#[tokio::test]
async fn a_running_crawl_keeps_its_spec_unless_replaced() {
    if !services_up() {
        return;
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (crawl, prefix) = (format!("replace-{id}"), format!("t{id}"));
    let submit = |extra: &[&str]| {
        trawl()
            .args([
                "submit",
                "http://127.0.0.1:1/",
                "--allow-private",
                "--crawl",
                &crawl,
            ])
            .args(extra)
            .env("TRAWL_QUEUE_PREFIX", &prefix)
            .output()
            .unwrap()
    };
    // No services run: the seeds stay on the discovered hop, so the crawl is running.
    let first = submit(&["--delay", "100"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let again = submit(&["--delay", "5"]);
    assert!(!again.status.success());
    let err = stderr(&again);
    assert!(
        err.contains("is running") && err.contains("--replace"),
        "{err}"
    );
    let spec = trawl_cluster::spec::get("redis://127.0.0.1:6379", &crawl)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        spec.settings.delay_ms, 100,
        "the refused submit changed the spec"
    );

    let replaced = submit(&["--delay", "5", "--replace"]);
    assert!(replaced.status.success(), "{}", stderr(&replaced));
    let spec = trawl_cluster::spec::get("redis://127.0.0.1:6379", &crawl)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(spec.settings.delay_ms, 5);
    assert!(spec.settings.allow_private);

    // The servers its per-host state is sharded across are the crawl's for life: another
    // count is refused, --replace or not, and the spec stays.
    let resharded = submit(&["--replace", "--redis-state-url", "redis://127.0.0.1:6379"]);
    assert!(!resharded.status.success());
    let err = stderr(&resharded);
    assert!(
        err.contains("another --crawl id") && err.contains("TRAWL_REDIS_STATE_URLS"),
        "{err}"
    );
    let kept = trawl_cluster::spec::get("redis://127.0.0.1:6379", &crawl)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((kept.state_shards, kept.settings.delay_ms), (1, 5));
    // Nor is its progress summed over another count of servers.
    let status = trawl()
        .args([
            "status",
            &crawl,
            "--redis-state-url",
            "redis://127.0.0.1:6379",
        ])
        .env("TRAWL_QUEUE_PREFIX", &prefix)
        .output()
        .unwrap();
    assert!(!status.status.success());
    assert!(
        stderr(&status).contains("TRAWL_REDIS_STATE_URLS"),
        "{}",
        stderr(&status)
    );
    cleanup(&prefix, &crawl, Some("redis://127.0.0.1:6379")).await;
}

/// A nats-server of the test's own that wants a user and password.
struct SecuredNats {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for SecuredNats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn secured_nats() -> Option<SecuredNats> {
    let server = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(server)
        .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
        .arg(dir.path())
        .args(["--user", "trawl", "--pass", "s3cret-pass"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "nats-server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(SecuredNats {
        child,
        port,
        _dir: dir,
    })
}

#[test]
fn the_command_reaches_a_nats_server_that_wants_credentials() {
    if !services_up() {
        return;
    }
    let Some(nats) = secured_nats() else {
        if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
            panic!("nats-server binary required (TRAWL_REQUIRE_SERVICES=1)");
        }
        eprintln!("SKIPPED: no nats-server binary to start a secured server");
        return;
    };
    let url = format!("nats://127.0.0.1:{}", nats.port);
    let crawl = format!("secured-{}", uuid::Uuid::new_v4().simple());
    let without = trawl()
        .args(["status", &crawl, "--json", "--nats-url", &url])
        .output()
        .unwrap();
    assert!(
        !without.status.success(),
        "status got in without credentials"
    );
    let with = trawl()
        .args(["status", &crawl, "--json", "--nats-url", &url])
        .env("TRAWL_NATS_USER", "trawl")
        .env("TRAWL_NATS_PASSWORD", "s3cret-pass")
        .output()
        .unwrap();
    assert!(with.status.success(), "{}", stderr(&with));
    let status: serde_json::Value = serde_json::from_slice(&with.stdout).unwrap();
    assert_eq!(status["crawl"], crawl.as_str());
    assert_eq!(status["drained"], true);
    // A password in the URL never reaches an error message.
    let leaked = trawl()
        .args(["status", &crawl, "--nats-url"])
        .arg(format!("nats://trawl:wrong-pass@127.0.0.1:{}", nats.port))
        .output()
        .unwrap();
    assert!(!leaked.status.success());
    assert!(
        !stderr(&leaked).contains("wrong-pass"),
        "{}",
        stderr(&leaked)
    );
}

/// A `--wait` that times out says where the crawl is stuck: its counts and the messages
/// pending on each hop (no services run here, so the seed waits on the discovered hop).
#[tokio::test]
async fn a_wait_that_times_out_says_where_the_crawl_is_stuck() {
    if !services_up() {
        return;
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    let out = trawl()
        .args(["submit", "http://127.0.0.1:1/", "--allow-private"])
        .args(["--crawl", &format!("stuck-{id}")])
        .args(["--wait", "--wait-timeout", "2"])
        .env("TRAWL_QUEUE_PREFIX", format!("t{id}"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("did not drain in 2 s"), "{err}");
    assert!(err.contains("0 pages fetched"), "{err}");
    assert!(
        err.contains("messages pending by hop: discovered 1"),
        "{err}"
    );
}
