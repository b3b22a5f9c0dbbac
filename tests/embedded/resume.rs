//! Durable embedded crawls: a crawl stopped by Ctrl-C and killed (SIGKILL) at random
//! moments resumes with `--resume` to exactly what one uninterrupted crawl writes (every
//! page one line of `pages.jsonl`, each chunk once in the index, WARC files readable), and
//! a crawl directory is never written over unless asked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{options, pages, report};
use trawl_runtime::StartMode;
use trawl_testsite::{Robots, SiteConfig, TestSite};

const PAGES: usize = 400;

/// A site of `PAGES` pages, each with text of its own and links that reach all of them.
fn write_site(dir: &Path) {
    let words = [
        "river", "stone", "lantern", "harbor", "meadow", "copper", "signal", "orchard", "glacier",
        "engine", "violet", "canyon", "ledger", "thistle", "beacon", "quarry", "saddle", "willow",
    ];
    std::fs::create_dir_all(dir.join("p")).unwrap();
    for n in 0..PAGES {
        let mut text = String::new();
        let mut x = (n as u64 + 1) * 2_654_435_761;
        for s in 0..60 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            text.push_str(words[(x % words.len() as u64) as usize]);
            text.push_str(if s % 12 == 11 { ". " } else { " " });
        }
        let links: Vec<usize> = vec![(n + 1) % PAGES, (n * 7 + 3) % PAGES, (n * 13 + 5) % PAGES];
        let links: String = links
            .iter()
            .map(|l| format!("<li><a href=\"/p/{l}.html\">page {l}</a></li>"))
            .collect();
        let html = format!(
            "<!doctype html><html><head><title>Page {n}</title></head><body>\
             <nav><ul>{links}</ul></nav><main><h1>Page {n}</h1>\
             <p>This is page number {n} of the resume test site. {text}</p>\
             <h2>Details of {n}</h2><p>{text} The end of page {n}.</p></main></body></html>"
        );
        std::fs::write(dir.join(format!("p/{n}.html")), html).unwrap();
    }
}

/// A small xorshift, seeded from the clock unless `TRAWL_KILL_SEED` is set (the seed is
/// printed, so a failing schedule can be replayed).
struct Moments(u64);

impl Moments {
    fn new() -> Self {
        let seed = std::env::var("TRAWL_KILL_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("kill schedule seed: TRAWL_KILL_SEED={seed}");
        Moments(seed)
    }

    /// Milliseconds in `lo..hi`.
    fn next(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + self.0 % (hi - lo)
    }
}

/// Microseconds since the Unix epoch, the clock of the site's log.
fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Runs the crawl; with `stop_after`, sends `signal` then. Returns the exit code (None:
/// killed by a signal) and whether it was still running when the signal went.
fn run(trawl: &Path, args: &[String], stop_after: Option<(u64, &str)>) -> (Option<i32>, bool) {
    let mut child = Command::new(trawl)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("trawl starts");
    let mut interrupted = false;
    if let Some((ms, signal)) = stop_after {
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if child.try_wait().unwrap().is_none() {
            let pid = child.id().to_string();
            assert!(
                Command::new("kill")
                    .args([signal, &pid])
                    .status()
                    .unwrap()
                    .success()
            );
            interrupted = true;
        }
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !interrupted && out.status.code() != Some(0) {
        panic!("trawl failed ({:?}):\n{stderr}", out.status.code());
    }
    (out.status.code(), interrupted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_stopped_and_killed_at_random_moments_resumes_to_every_page_once() {
    let trawl = support::bin("trawl").expect("the trawl binary is built with the tests");
    let tmp = tempfile::tempdir().unwrap();
    write_site(&tmp.path().join("site"));
    let site = TestSite::start(SiteConfig {
        dir: Some(tmp.path().join("site")),
        robots: Robots::Status(404),
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let out = tmp.path().join("crawl");
    let args: Vec<String> = [
        "crawl".into(),
        site.url("/p/0.html"),
        "--out".into(),
        out.display().to_string(),
        "--allow-private".into(),
        "--delay".into(),
        "20".into(),
        "--concurrency".into(),
        "4".into(),
        "--progress".into(),
        "none".into(),
        "--no-embed".into(),
        // The dedup gate moves to its file early, so the kills meet it there too.
        "--gate-in-memory".into(),
        "20".into(),
        "--resume".into(),
    ]
    .to_vec();
    let trawl2 = trawl.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        let mut m = Moments::new();
        let mut stops = Vec::new();
        // When each run started and ended, to tell its requests from the others'.
        let mut windows = Vec::new();
        // First Ctrl-C (a clean stop), then kill -9 three times, then to the end.
        let schedule = [("-INT", m.next(300, 1500))]
            .into_iter()
            .chain((0..3).map(|_| ("-KILL", m.next(200, 1500))));
        for (signal, ms) in schedule {
            let start = now_us();
            let (code, stopped) = run(&trawl2, &args, Some((ms, signal)));
            windows.push((start, now_us()));
            if signal == "-INT" && stopped {
                assert_eq!(code, Some(130), "Ctrl-C exits with 130");
            }
            stops.push((signal, ms, stopped));
            if !stopped {
                // Finished before the signal: nothing left to resume.
                return (stops, windows);
            }
        }
        let start = now_us();
        let (code, _) = run(&trawl2, &args, None);
        windows.push((start, now_us()));
        assert_eq!(code, Some(0));
        (stops, windows)
    })
    .await
    .unwrap();
    let (outcome, windows) = outcome;
    eprintln!("stops: {outcome:?}");
    let kills = outcome.iter().filter(|(_, _, stopped)| *stopped).count();
    assert!(kills >= 2, "the crawl was stopped mid-way: {outcome:?}");

    // Every page once.
    let written = pages(&out);
    let mut per_url: BTreeMap<String, usize> = BTreeMap::new();
    for p in &written {
        *per_url
            .entry(p["url"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    let twice: Vec<_> = per_url.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "pages written twice: {twice:?}");
    let expected: BTreeSet<String> = (0..PAGES)
        .map(|n| site.url(&format!("/p/{n}.html")))
        .collect();
    let got: BTreeSet<String> = per_url.keys().cloned().collect();
    assert_eq!(
        got.symmetric_difference(&expected).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "the resumed crawl wrote exactly the site's pages"
    );
    assert!(written.iter().all(|p| p["status"] == 200));

    // Each page fetched once, except those in flight at a stop, and those once more: no
    // run asks for a page twice, and a page comes again only in the run after a stop.
    let hits = site.hits("/p/");
    let mut fetches: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_run: BTreeMap<(usize, String), usize> = BTreeMap::new();
    for e in &hits {
        *fetches.entry(e.target.clone()).or_default() += 1;
        let run = windows
            .iter()
            .position(|(a, b)| (*a..=*b).contains(&e.start_us))
            .unwrap_or_else(|| panic!("{} requested outside every run", e.target));
        *per_run.entry((run, e.target.clone())).or_default() += 1;
    }
    let twice: Vec<_> = per_run.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "pages one run asked for twice: {twice:?}");
    let most = fetches.values().max().copied().unwrap_or(0);
    assert!(
        most <= 1 + kills,
        "a page is fetched again once per stop at most: {most} requests for one page"
    );
    let again: usize = fetches.values().map(|n| n - 1).sum();
    eprintln!("pages fetched again after a stop: {again}");
    assert!(
        again <= kills * 40,
        "at most the pages in flight are fetched again: {again} after {kills} stops"
    );

    // The report counts the whole crawl.
    let r = report(&out);
    assert_eq!(r["pages"].as_u64(), Some(PAGES as u64), "{r}");

    // The index holds every page's chunks once.
    let store = trawl_index::store::Store::open_existing(&out.join("index").to_string_lossy())
        .await
        .unwrap();
    let mut ids = trawl_index::store::string_column(store.chunks(), "id")
        .await
        .unwrap();
    ids.extend(
        trawl_index::store::string_column(store.aliases(), "id")
            .await
            .unwrap(),
    );
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no chunk is stored twice");
    let mut indexed: BTreeSet<String> =
        trawl_index::store::string_column(store.chunks(), "canonical_url")
            .await
            .unwrap()
            .into_iter()
            .collect();
    indexed.extend(
        trawl_index::store::string_column(store.aliases(), "canonical_url")
            .await
            .unwrap(),
    );
    let want: BTreeSet<String> = written
        .iter()
        .filter(|p| p["duplicate_of"].is_null())
        .map(|p| p["url"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(indexed, want, "the index holds exactly the kept pages");

    // WARC files: every one readable to its end, by warcio when it is there.
    let warcs = trawl_fetcher::warcout::list_warc_files(&out.join("warc")).unwrap();
    // A run killed before its first response opens no file (seen once under load), so
    // not one a run: more than one, none of them appended to by a later run (the repair
    // below finds every file whole).
    assert!(
        warcs.len() > 1,
        "each run writes files of its own: {warcs:?}"
    );
    for w in &warcs {
        assert_eq!(
            trawl_fetcher::warcout::repair(w).unwrap(),
            0,
            "{} ends with a whole record",
            w.display()
        );
    }
    if support::python_has("warcio") {
        let script = "import sys\nfrom warcio.archiveiterator import ArchiveIterator\nn=0\n\
                      for f in sys.argv[1:]:\n    with open(f,'rb') as s:\n        \
                      for r in ArchiveIterator(s):\n            \
                      n += r.rec_type == 'response'\nprint(n)";
        let out = Command::new("python3")
            .arg("-c")
            .arg(script)
            .args(&warcs)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "warcio reads every file: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let responses: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert!(
            responses >= PAGES,
            "{responses} responses for {PAGES} pages"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_directory_is_never_written_over_unless_asked() {
    let site = TestSite::start(SiteConfig::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let seeds = vec![site.url("/")];

    // A directory trawl did not write is refused, and left as it was.
    let foreign = tmp.path().join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("thesis.tex"), "mine").unwrap();
    for overwrite in [false, true] {
        let mut o = options(&seeds, &foreign);
        if overwrite {
            o.start = StartMode::Overwrite;
        }
        let e = trawl::crawl(o).await.unwrap_err().to_string();
        assert!(
            e.contains("files trawl did not write") && e.contains("thesis.tex"),
            "{e}"
        );
    }
    assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 1);

    let out = tmp.path().join("crawl");
    trawl::crawl(options(&seeds, &out)).await.unwrap();
    let before = std::fs::read(out.join("pages.jsonl")).unwrap();
    let warc_before = trawl_fetcher::warcout::list_warc_files(&out.join("warc")).unwrap();
    assert!(!before.is_empty() && !warc_before.is_empty());

    // A finished crawl is kept: the same command again, or with --resume, is refused.
    for resume in [false, true] {
        let mut o = options(&seeds, &out);
        if resume {
            o.start = StartMode::Resume;
        }
        let e = trawl::crawl(o).await.unwrap_err().to_string();
        assert!(
            e.contains("holds a finished crawl") && e.contains("--overwrite"),
            "{e}"
        );
    }
    // A mistyped model directory fails before any output is touched.
    let mut o = options(&seeds, &out);
    o.start = StartMode::Overwrite;
    o.index.no_index = false;
    o.index.settings.embed = true;
    o.index.settings.model_dir = Some(tmp.path().join("no-such-model"));
    let e = format!("{:#}", trawl::crawl(o).await.unwrap_err());
    assert!(e.contains("no-such-model"), "{e}");
    assert_eq!(std::fs::read(out.join("pages.jsonl")).unwrap(), before);
    assert_eq!(
        trawl_fetcher::warcout::list_warc_files(&out.join("warc")).unwrap(),
        warc_before
    );

    // --overwrite starts over: one crawl's pages, not two.
    let mut o = options(&seeds, &out);
    o.start = StartMode::Overwrite;
    trawl::crawl(o).await.unwrap();
    let again = pages(&out);
    assert_eq!(
        again.len(),
        before.iter().filter(|b| **b == b'\n').count(),
        "the same site crawled again from scratch"
    );
    assert_eq!(report(&out)["pages"].as_u64(), Some(again.len() as u64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfinished_crawl_is_resumed_only_when_asked_and_from_the_same_start() {
    let site = TestSite::start(SiteConfig {
        pages: 40,
        ..SiteConfig::default()
    })
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("crawl");
    let seeds = vec![site.url("/page/1")];
    // A crawl stopped by its budget is finished; one whose store says running is not.
    trawl::crawl(options(&seeds, &out)).await.unwrap();
    set_status(&out, "running");

    let e = trawl::crawl(options(&seeds, &out))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unfinished crawl") && e.contains("--resume"),
        "{e}"
    );
    let mut o = options(&[site.url("/blog/1")], &out);
    o.start = StartMode::Resume;
    let e = trawl::crawl(o).await.unwrap_err().to_string();
    assert!(e.contains("give the same start URLs"), "{e}");

    // Resumed with nothing left to do: the same pages, none fetched again.
    let before = pages(&out).len();
    let hits = site.hits("/page/").len();
    let mut o = options(&seeds, &out);
    o.start = StartMode::Resume;
    trawl::crawl(o).await.unwrap();
    assert_eq!(pages(&out).len(), before);
    assert_eq!(site.hits("/page/").len(), hits, "nothing is fetched again");
    assert_eq!(report(&out)["pages"].as_u64(), Some(before as u64));
}

/// Sets the status in the crawl store, as a crawl that stopped without finishing leaves it.
fn set_status(out: &Path, status: &str) {
    let conn = trawl_store::schema::open(&out.join(trawl_store::DB_FILE)).unwrap();
    trawl_store::schema::set(&conn, trawl_store::schema::keys::STATUS, status).unwrap();
}
