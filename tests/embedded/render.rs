//! JavaScript rendering with a real Chromium (Debian's `chromium-headless-shell`, which the
//! test command installs): the render rule picks the pages that need it and no others, the
//! renderer answers every request the pages make through the fetcher's checks, a page that
//! never settles is cut at its deadline, and a crashed or hung browser is replaced.
//!
//! Without a Chromium the tests say so and pass, unless `TRAWL_REQUIRE_CHROMIUM=1` (set by
//! the test command) makes that a failure.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use support::{options, page, pages, report};
use trawl_core::render::RenderMode;
use trawl_core::scope::{Scope, ScopeKind};
use trawl_testsite::js::JS_SENTENCE;
use trawl_testsite::{Robots, SiteConfig, TestSite};
use warc::{RecordType, WarcHeader, WarcReader};

fn chromium() -> Option<std::path::PathBuf> {
    let found = trawl_renderer::find_chromium(None);
    if found.is_none() {
        if std::env::var("TRAWL_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1") {
            panic!("no Chromium found and TRAWL_REQUIRE_CHROMIUM=1 (run scripts/chromium.sh)");
        }
        eprintln!("skipped: no Chromium found (scripts/chromium.sh installs one)");
    }
    found
}

fn render_of(p: &Value) -> &Value {
    &p["render"]
}

fn hits(site: &TestSite, path: &str) -> usize {
    site.log().iter().filter(|e| e.target == path).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_that_need_javascript_are_rendered_and_no_others() {
    if chromium().is_none() {
        return;
    }
    let site = TestSite::start(SiteConfig {
        robots: Robots::Body("User-agent: *\nDisallow: /js/secret\n".into()),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut o = options(&[site.url("/js/")], out.path());
    o.crawl.scope = ScopeKind::Prefix;
    o.crawl.render = RenderMode::Auto;
    o.crawl.render_timeout_s = 4;
    let (_, outputs) = trawl::crawl(o).await.unwrap();
    let all = pages(out.path());

    for (path, reason) in [
        ("/js/inline", "script_shell"),
        ("/js/shell", "empty_app_root"),
    ] {
        let p = page(&all, path);
        let r = render_of(p);
        assert_eq!(r["reason"], reason, "{p}");
        assert_eq!(r["rendered"], true, "{p}");
        assert!(r.get("error").is_none(), "{p}");
        let text = p["text"].as_str().unwrap();
        assert!(text.contains(JS_SENTENCE), "{path}: {p}");
    }
    // The links the scripts wrote were followed.
    assert_eq!(page(&all, "/js/child")["status"], 200);
    // The app's own requests went through the fetcher; its document was not fetched twice.
    let shell = render_of(page(&all, "/js/shell"));
    assert!(shell["requests"].as_u64().unwrap() >= 3, "{shell}");
    assert_eq!(
        hits(&site, "/js/shell"),
        1,
        "the fetched document is reused"
    );
    assert_eq!(hits(&site, "/js/app.js"), 1);
    assert_eq!(hits(&site, "/js/data.json"), 3, "shell, reach twice");

    // Server-rendered, eight scripts: never sent to the browser, none of its scripts loaded.
    let ssr = page(&all, "/js/ssr");
    assert!(ssr.get("render").is_none(), "{ssr}");
    assert!(ssr["text"].as_str().unwrap().contains("server wrote it"));
    assert!(
        !site
            .log()
            .iter()
            .any(|e| e.target.starts_with("/js/chunk/"))
    );
    // The index page has its text: not rendered either.
    assert!(page(&all, "/js/").get("render").is_none());

    // What a page's scripts may not reach, they do not: refused and counted.
    let reach = page(&all, "/js/reach");
    let blocked = &render_of(reach)["blocked"];
    assert_eq!(blocked["robots"], 1, "{reach}");
    assert_eq!(blocked["out_of_scope"], 1, "{reach}");
    assert!(reach["text"].as_str().unwrap().contains(JS_SENTENCE));
    assert_eq!(hits(&site, "/js/secret"), 0);
    assert_eq!(hits(&site, "/outside"), 0);

    // A page that never settles is cut at its deadline; the crawl went on.
    let never = render_of(page(&all, "/js/never"));
    assert!(
        never["error"].as_str().unwrap().starts_with("timeout"),
        "{never}"
    );
    assert!(never["ms"].as_u64().unwrap() >= 4000, "{never}");

    let rep = report(out.path());
    let r = &rep["render"];
    assert_eq!(r["rendered"], 4, "{r}");
    assert_eq!(r["timeouts"], 1, "{r}");
    assert_eq!(r["blocked"]["robots"], 1, "{r}");
    assert_eq!(
        r["wanted"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_i64().unwrap())
            .sum::<i64>(),
        4
    );

    // The WARC keeps the response and the rendered DOM as a conversion record pointing at it.
    let mut conversions = std::collections::HashMap::new();
    let mut responses = std::collections::HashSet::new();
    for f in &outputs.warc_files {
        for rec in WarcReader::from_path_gzip(f).unwrap().iter_records() {
            let rec = rec.unwrap();
            match rec.warc_type() {
                RecordType::Conversion => {
                    let refers = rec.header(WarcHeader::RefersTo).unwrap().to_string();
                    let body = String::from_utf8_lossy(rec.body()).into_owned();
                    conversions.insert(rec.warc_id().to_string(), (refers, body));
                }
                RecordType::Response => {
                    responses.insert(rec.warc_id().to_string());
                }
                _ => {}
            }
        }
    }
    let shell_page = page(&all, "/js/shell");
    let id = shell_page["render"]["warc"]["record_id"].as_str().unwrap();
    let (refers, dom) = &conversions[id];
    assert_eq!(
        refers,
        shell_page["response"]["warc"]["record_id"]
            .as_str()
            .unwrap()
    );
    assert!(responses.contains(refers));
    assert!(dom.contains(JS_SENTENCE));
    assert_eq!(conversions.len(), 4, "one per rendered page");
}

fn renderer(
    allow_private: bool,
    seed: &str,
    limits: trawl_renderer::BrowserLimits,
) -> trawl_renderer::Renderer {
    let mut s = trawl_core::settings::CrawlSettings {
        allow_private,
        delay_ms: 0,
        render_timeout_s: 5,
        ..Default::default()
    };
    s.warc = false;
    let mut cfg = trawl_renderer::RendererConfig::from_settings(&s, &Default::default()).unwrap();
    cfg.browser = limits;
    let state = Arc::new(trawl_core::state::MemoryState::new(
        100,
        1,
        trawl_core::state::WorkTracker::default(),
    ));
    let scope = Scope::new(ScopeKind::Host, &[url::Url::parse(seed).unwrap()]);
    let fetcher = trawl_fetcher::Fetcher::new(
        trawl_fetcher::FetcherConfig::from_settings("t", &s),
        state,
        scope.clone(),
        s.normalizer(),
        None,
    )
    .unwrap();
    trawl_renderer::Renderer::new(cfg, fetcher, &s, scope, None)
}

/// A page as the render hop carries it: fetched already, so the browser never requests it.
fn fetched(url: &str, html: &str) -> trawl_core::Fetched {
    trawl_core::Fetched {
        crawl: "t".into(),
        job: trawl_core::FetchJob {
            url: url.into(),
            ..Default::default()
        },
        final_url: url.into(),
        status: 200,
        content_type: Some("text/html".into()),
        body: html.as_bytes().to_vec(),
        render: Some(trawl_core::render::RenderInfo {
            reason: "test".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_cannot_reach_a_private_address_it_was_not_allowed() {
    if chromium().is_none() {
        return;
    }
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let url = site.url("/js/app");
    // Private addresses are not allowed, so the page's own address is not either: only its
    // fetched body (given) reaches the browser.
    let r = renderer(false, &url, Default::default());
    let html = format!(
        "<body><div id=root></div><script>fetch('{}').then(r => r.text()).then(t => \
         document.getElementById('root').textContent = 'got ' + t)\
         .catch(() => document.getElementById('root').textContent = 'refused');</script></body>",
        site.url("/js/data.json")
    );
    let out = r.render(fetched(&url, &html)).await.unwrap();
    let info = out.render.as_ref().unwrap();
    assert!(info.rendered, "{info:?}");
    assert_eq!(info.blocked.get("private_address"), Some(&1), "{info:?}");
    assert!(String::from_utf8_lossy(&out.body).contains("refused"));
    assert!(
        site.log().is_empty(),
        "nothing reached the server: {:?}",
        site.log()
    );
    r.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_or_hung_browser_is_replaced() {
    if chromium().is_none() {
        return;
    }
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let url = site.url("/js/x");
    let limits = trawl_renderer::BrowserLimits {
        command_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let r = renderer(true, &url, limits);
    let page = fetched(
        &url,
        "<body><script>document.body.innerHTML = '<p>written by a script</p>'</script></body>",
    );
    // The script's string is in the fetched body too: only the DOM has it as an element.
    let ok = |f: &trawl_core::Fetched| {
        String::from_utf8_lossy(&f.body).contains("<body><p>written by a script</p></body>")
    };
    assert!(ok(&r.render(page.clone()).await.unwrap()));
    let pid = r.pool().pid().await.unwrap();

    // Killed: the next page gets a fresh browser.
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut rendered = r.render(page.clone()).await.unwrap();
    if !ok(&rendered) {
        // The crash was noticed by this page: it kept its fetched version, the next renders.
        assert!(rendered.render.as_ref().unwrap().error.is_some());
        rendered = r.render(page.clone()).await.unwrap();
    }
    assert!(ok(&rendered), "{:?}", rendered.render);
    assert!(r.pool().restarts() >= 1);
    let second = r.pool().pid().await.unwrap();
    assert_ne!(second, pid);

    // Stopped (a hang): the page is cut, keeps its fetched version, and the browser is
    // killed and started again for the next one.
    std::process::Command::new("kill")
        .args(["-STOP", &second.to_string()])
        .status()
        .unwrap();
    let hung = r.render(page.clone()).await.unwrap();
    let info = hung.render.as_ref().unwrap();
    assert!(!info.rendered && info.error.is_some(), "{info:?}");
    assert!(!ok(&hung));
    let after = r.render(page.clone()).await.unwrap();
    assert!(ok(&after), "{:?}", after.render);
    assert_ne!(r.pool().pid().await.unwrap(), second);
    // Already gone with the restart, normally: quiet either way.
    let _ = std::process::Command::new("kill")
        .args(["-9", &second.to_string()])
        .stderr(std::process::Stdio::null())
        .status();
    r.close().await;
}

/// The cluster: the extractor service sends the page to the `render` stream, where the
/// renderer service renders it and writes it through the docs stream, its links followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_renderer_service_renders_what_the_extractors_send_it() {
    use support::services::{NAMES, Services, free_port, service_bins, spawn, submit_wait};
    let Some(paths) = service_bins() else {
        return;
    };
    if chromium().is_none() {
        return;
    }
    let site = TestSite::start(SiteConfig {
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (crawl, prefix) = (format!("r{}", &tag[..10]), format!("r{}", &tag[..10]));
    let out = tempfile::tempdir().unwrap();
    let env: Vec<(&str, String)> = vec![
        ("TRAWL_CRAWL", crawl.clone()),
        ("TRAWL_QUEUE_PREFIX", prefix.clone()),
        ("TRAWL_OUT", out.path().display().to_string()),
        ("TRAWL_CONCURRENCY", "2".into()),
    ];
    let mut services = Services(Vec::new());
    // Frontier, fetcher, extractor, indexer, renderer.
    for stage in [1, 2, 3, 4, 6] {
        services
            .0
            .push((NAMES[stage].into(), spawn(&paths[stage], &env, free_port())));
    }
    let report = submit_wait(
        &paths[0],
        &[
            &site.url("/js/shell"),
            &site.url("/js/ssr"),
            "--allow-private",
            "--delay",
            "0",
            "--scope",
            "prefix",
        ],
        &[("TRAWL_CRAWL", &crawl), ("TRAWL_QUEUE_PREFIX", &prefix)],
    )
    .await
    .unwrap();
    assert_eq!(report["drained"], true, "{report}");
    assert_eq!(report["dead_letters"], 0, "{report}");
    let mut all = Vec::new();
    for f in std::fs::read_dir(out.path()).unwrap() {
        let f = f.unwrap().path();
        if f.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("pages-")
        {
            for line in std::fs::read_to_string(&f).unwrap().lines() {
                all.push(serde_json::from_str::<Value>(line).unwrap());
            }
        }
    }
    let shell = page(&all, "/js/shell");
    assert_eq!(shell["render"]["rendered"], true, "{shell}");
    assert!(shell["text"].as_str().unwrap().contains(JS_SENTENCE));
    assert!(page(&all, "/js/ssr").get("render").is_none());
    assert_eq!(page(&all, "/js/child")["status"], 200);
    // The renderer's WARC series holds the DOM, referring to the fetcher's response.
    let conversions: Vec<String> = std::fs::read_dir(out.path().join("warc"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("trawl-render-")
        })
        .flat_map(|p| {
            WarcReader::from_path_gzip(&p)
                .unwrap()
                .iter_records()
                .map(|r| r.unwrap())
                .filter(|r| r.warc_type() == &RecordType::Conversion)
                .map(|r| r.header(WarcHeader::RefersTo).unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        conversions,
        vec![
            shell["response"]["warc"]["record_id"]
                .as_str()
                .unwrap()
                .to_string()
        ]
    );
    drop(services);
    support::cleanup(&prefix, &crawl, Some("redis://127.0.0.1:6379")).await;
}
