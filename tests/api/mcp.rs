//! `trawl mcp`, driven by the official MCP client from PyPI (`mcp`, tests/py/mcp_client.py)
//! through every tool on both transports: streamable HTTP (the server in this process, its
//! API beside `/mcp` for the monitor the `changes` tool reads) and stdio (the `trawl`
//! binary as the client's child, over a `trawl watch` directory's change feed).

use std::path::Path;
use std::time::Duration;

use support::api_site::Fixture;
use trawl_runtime::watch::{WatchPlan, round};
use trawl_runtime::{CrawlPlan, Targets};

use super::args;

async fn client(mode: &str, target: &str, site: &str, extra: &[(&str, String)]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/mcp_client.py");
    let mut cmd = tokio::process::Command::new("python3");
    cmd.arg(script).arg(mode).arg(target).env("SITE", site);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(600), cmd.output())
        .await
        .expect("the MCP client finished")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!(
        "--- {mode}\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the MCP checks ({mode}) failed:\n{stdout}"
    );
    assert!(stdout.contains("all passed"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_tool_through_the_official_client_on_both_transports() {
    if !support::python_has("mcp") || !support::python_has("firecrawl") {
        return;
    }
    let site = Fixture::start().await;
    let dir = tempfile::tempdir().unwrap();

    // Streamable HTTP, the server in this process.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(trawl_api::mcp_http(
        listener,
        args(&dir.path().join("http"), &[]),
        async move {
            let _ = rx.await;
        },
    ));
    client(
        "http",
        &format!("{base}/mcp"),
        &site.url(""),
        &[("API", base.clone())],
    )
    .await;
    drop(tx);
    server.await.unwrap().unwrap();

    // stdio: two rounds of `trawl watch` over the wiki, a page changed between them.
    let watch = dir.path().join("watch");
    let mut settings = args(&dir.path().join("unused"), &[]).settings;
    settings.crawl.max_pages = 20;
    let plan = WatchPlan {
        crawl: CrawlPlan::new(&settings, Targets::seeds([site.url("/wiki/")]), &watch),
        every: Duration::ZERO,
        rounds: 1,
        keep: 2,
    };
    round(&plan, true).await.unwrap();
    reqwest::Client::new()
        .post(site.url("/__wiki/one"))
        .body("The first wiki page now tells of lightships instead.")
        .send()
        .await
        .unwrap();
    round(&plan, true).await.unwrap();
    let trawl = support::bin("trawl").expect("the trawl binary (cargo build --workspace --bins)");
    client(
        "stdio",
        &trawl.display().to_string(),
        &site.url(""),
        &[
            ("DATA", dir.path().join("stdio").display().to_string()),
            ("WATCH", watch.display().to_string()),
        ],
    )
    .await;
}
