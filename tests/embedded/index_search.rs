//! End to end: crawl a small documentation site of the test server with the default index
//! (chunks, embeddings, LanceDB), then search it: the page that answers the query comes
//! first, and the "whole book on one page" copy of every chapter is stored once.

use std::path::Path;

use support::options;
use trawl::index::SearchArgs;
use trawl_index::Mode;
use trawl_testsite::{Robots, SiteConfig, TestSite};

const CHAPTERS: [(&str, &str, &str); 4] = [
    (
        "install.html",
        "Installing the server",
        "Download the release archive for your platform, unpack it into /opt/server and run the installer script as root. The installer creates a system user, writes a default configuration file and registers a service unit so the server starts at boot. Check the installation with the version command.",
    ),
    (
        "tls.html",
        "Configuring TLS certificates",
        "To serve HTTPS, point the tls section of the configuration at your certificate chain and private key in PEM format. Certificates from Let's Encrypt are renewed automatically when the acme option is on; the server reloads them without dropping connections. Ciphers older than TLS 1.2 are refused.",
    ),
    (
        "backup.html",
        "Backups and restore",
        "Take a consistent snapshot with the backup command while the server runs: it writes a compressed archive of the data directory. To restore, stop the server, run restore with the archive's path, and start the server again; the data is back as it was at the time of the snapshot.",
    ),
    (
        "limits.html",
        "Rate limiting",
        "Each client address may make a limited number of requests per second; requests over the limit get status 429 with a Retry-After header. Set the rate and the burst size per route in the limits section, and exempt trusted networks by listing their address ranges.",
    ),
];

fn write_site(dir: &Path) {
    let page = |title: &str, body: &str, nav: &str| {
        format!(
            "<!doctype html><html lang=en><head><title>{title}</title></head><body>\
             <nav>{nav}</nav><main><h1>{title}</h1>{body}</main>\
             <footer>Server documentation</footer></body></html>"
        )
    };
    let nav: String = CHAPTERS
        .iter()
        .map(|(f, t, _)| format!("<a href=\"/{f}\">{t}</a> "))
        .collect::<String>()
        + "<a href=\"/print.html\">Print</a>";
    let mut book = String::new();
    for (f, title, text) in CHAPTERS {
        let body = format!("<h2>Overview</h2><p>{text}</p>");
        std::fs::write(dir.join(f), page(title, &body, &nav)).unwrap();
        book.push_str(&format!("<h2>{title}</h2><p>{text}</p>"));
    }
    std::fs::write(
        dir.join("print.html"),
        page("The whole manual", &book, &nav),
    )
    .unwrap();
    std::fs::write(
        dir.join("index.html"),
        page(
            "Server documentation",
            "<p>Welcome. Pick a chapter from the menu to get started with the server.</p>",
            &nav,
        ),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawl_then_search_finds_the_answering_page() {
    let dir = tempfile::tempdir().unwrap();
    let Some(_model) = support::embedding_model() else {
        return;
    };
    let site_dir = dir.path().join("site");
    std::fs::create_dir_all(&site_dir).unwrap();
    write_site(&site_dir);
    // No robots.txt: the test site's default one lists sitemaps of pages of its own.
    let site = TestSite::start(SiteConfig {
        dir: Some(site_dir),
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = dir.path().join("out");
    let mut o = options(&[site.url("/index.html")], &out);
    o.index.no_index = false;
    let (report, _) = trawl::crawl(o).await.unwrap();
    let ix = report.index.expect("indexed by default");
    let written = support::pages(&out);
    let urls: Vec<&str> = written.iter().map(|p| p["url"].as_str().unwrap()).collect();
    let indexable = written
        .iter()
        .filter(|p| trawl_index::indexer::wants(&serde_json::from_value((*p).clone()).unwrap()))
        .count();
    assert_eq!(ix.pages as usize, indexable, "{ix:?} {urls:?}");
    assert_eq!(ix.pages, 6, "{ix:?} {urls:?}");
    // The print page repeats four chapters: their text is stored once. A chapter crawled
    // after the print page takes its chunk over (the print page keeps an alias), so which
    // count holds an alias depends on the order the pages came in.
    assert_eq!(
        ix.aliases_exact + ix.aliases_near + ix.chunks_rehomed,
        4,
        "{ix:?}"
    );

    let queries = [
        ("how do I get my data back from a snapshot", "backup.html"),
        ("set up HTTPS with a certificate", "tls.html"),
        ("too many requests from one client", "limits.html"),
        ("unpack the archive and run the installer", "install.html"),
    ];
    for mode in [Mode::Vector, Mode::Hybrid] {
        for (q, want) in queries {
            let args = SearchArgs {
                query: q.into(),
                index: out.join("index"),
                k: 3,
                mode,
                json: true,
                model_dir: None,
            };
            let mut buf = Vec::new();
            let n = trawl::index::search(&args, &mut buf).await.unwrap();
            assert!(n >= 1);
            let first: serde_json::Value =
                serde_json::from_str(String::from_utf8_lossy(&buf).lines().next().unwrap())
                    .unwrap();
            assert!(
                first["url"].as_str().unwrap().ends_with(want),
                "{mode:?} {q:?}: first hit {first}"
            );
            assert_eq!(first["heading_path"], serde_json::json!(["Overview"]));
            let also = first["also_at"]
                .as_array()
                .expect("the print page holds it too");
            assert!(
                also.iter()
                    .any(|u| u.as_str().unwrap().ends_with("print.html")),
                "{first}"
            );
        }
    }
    // The index is whole: the crawl removed the full-text preview it kept meanwhile.
    assert!(out.join("index").is_dir());
    assert!(!out.join("index-preview").exists());
    preview_answers_text_while_it_is_there(&out).await;
    drop(site);
}

/// While a crawl's preview is there, full-text (and the text half of hybrid) search reads
/// it: a page only the preview holds is found, and no longer once it is gone.
async fn preview_answers_text_while_it_is_there(out: &Path) {
    let preview = out.join("index-preview");
    let mut o = trawl_index::IndexOptions::new(preview.to_string_lossy().to_string());
    o.embed = false;
    let mut ix = trawl_index::Indexer::open(o).await.unwrap();
    let page = trawl_core::PageRecord {
        url: "http://docs.test/new.html".into(),
        final_url: "http://docs.test/new.html".into(),
        status: 200,
        title: Some("Zanzibar mode".into()),
        text: "Zanzibar mode keeps a replica of every shard on standby. ".repeat(5),
        ..Default::default()
    };
    ix.add_page(&page).await.unwrap();
    ix.finish().await.unwrap();
    let urls = |mode: Mode| {
        let args = SearchArgs {
            query: "zanzibar replica".into(),
            index: out.join("index"),
            k: 3,
            mode,
            json: true,
            model_dir: None,
        };
        async move {
            let mut buf = Vec::new();
            trawl::index::search(&args, &mut buf).await.unwrap();
            String::from_utf8_lossy(&buf)
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["url"].clone())
                .collect::<Vec<_>>()
        }
    };
    let want = serde_json::json!("http://docs.test/new.html");
    assert_eq!(urls(Mode::Text).await.first(), Some(&want));
    assert!(urls(Mode::Hybrid).await.contains(&want));
    // The vector half reads the index, which does not hold the page.
    assert!(!urls(Mode::Vector).await.contains(&want));
    std::fs::remove_dir_all(&preview).unwrap();
    assert!(!urls(Mode::Text).await.contains(&want));
}
