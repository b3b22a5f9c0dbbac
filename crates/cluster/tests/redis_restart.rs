//! The patient Redis connection against a redis-server of the test's own that is killed
//! (`kill -9`) and started again on its AOF: a call made while it is away waits and goes
//! through once it is back, instead of failing the stage's loop; an error that says the
//! call is wrong comes back at once.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use trawl_cluster::redis_state::RedisState;
use trawl_core::state::State;

/// A redis-server on 127.0.0.4 with its AOF written every second in `dir`.
fn start(dir: &std::path::Path, port: u16) -> Option<Child> {
    let child = Command::new("redis-server")
        .args(["--bind", "127.0.0.4", "--port", &port.to_string()])
        .args([
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
        ])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .spawn()
        .ok()?;
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.4", port)).is_err() {
        if t.elapsed() > Duration::from_secs(10) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(child)
}

#[tokio::test]
async fn a_call_made_while_redis_restarts_waits_and_goes_through() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.4:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let Some(mut server) = start(dir.path(), port) else {
        if std::env::var("TRAWL_REQUIRE_SERVICES").is_ok_and(|v| v == "1") {
            panic!("cannot start a redis-server of the test's own");
        }
        eprintln!("SKIPPED: cannot start redis-server");
        return;
    };
    let url = format!("redis://127.0.0.4:{port}");
    let state = RedisState::connect(&url, "restart", 100, 1, 60_000)
        .await
        .unwrap();
    assert!(state.seen_add("http://a/1").await.unwrap());
    // Past the AOF's second, so the URL is on disk.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let _ = server.kill();
    let _ = server.wait();
    let started = Instant::now();
    let call = {
        let state = state.clone();
        tokio::spawn(async move { state.seen_add("http://a/2").await })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!call.is_finished(), "the call waits while Redis is away");
    let mut server = start(dir.path(), port).expect("redis-server starts again on its AOF");
    let added = call
        .await
        .unwrap()
        .expect("the call goes through once Redis is back");
    assert!(added);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(
        state.seen_contains("http://a/1").await.unwrap(),
        "the seen-set came back from the AOF"
    );
    // A call that is wrong (a counter that is no number) fails at once, not after the
    // retry budget.
    let mut conn = trawl_cluster::redis_conn::connect_patient(&url)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("word")
        .arg("abc")
        .query_async(&mut conn)
        .await
        .unwrap();
    let t = Instant::now();
    let wrong: redis::RedisResult<i64> =
        redis::cmd("INCR").arg("word").query_async(&mut conn).await;
    assert!(wrong.is_err());
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    let _ = server.kill();
    let _ = server.wait();
}
