use std::collections::{HashSet, VecDeque};

use super::*;

fn small(pages: u64, hosts: u32, first: [u8; 4]) -> WebConfig {
    WebConfig {
        pages,
        hosts,
        first_addr: Ipv4Addr::from(first),
        slow_every: 2,
        slow_ms: 30,
        error_every: 2,
        ..WebConfig::default()
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn hrefs(body: &str) -> Vec<String> {
    body.split("href=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn pages_are_deterministic_sized_and_near_copies_share_their_text() {
    let web = Web::start(small(400, 2, [127, 3, 0, 1])).await.unwrap();
    let c = client();
    let root = &web.roots()[0];
    let get = |p: String| {
        let c = c.clone();
        async move {
            let r = c.get(&p).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (s1, a) = get(format!("{root}p/18")).await;
    let (_, again) = get(format!("{root}p/18")).await;
    assert_eq!((s1, &a), (200, &again));
    assert!((1500..6000).contains(&a.len()), "{} bytes", a.len());
    let (_, copy) = get(format!("{root}p/19")).await;
    let text = |s: &str| s.split("<aside>").next().unwrap().to_string();
    assert!(text(&copy).starts_with(&text(&a).replace("</article>", "")));
    assert!(copy.contains("Printed as page 19."));
    let (_, other) = get(format!("{root}p/17")).await;
    assert_ne!(text(&other), text(&a));
    let links = hrefs(&a);
    assert!(links.len() >= 15, "{links:?}");
    assert!(links.iter().any(|l| l.starts_with("http://127.3.0.")));
    let s = web.stats();
    assert_eq!(s.pages_fetched, 3);
    assert_eq!(s.pages_fetched_again, 1);
}

#[tokio::test]
async fn the_mixed_in_faults_answer_as_described() {
    let web = Web::start(small(400, 2, [127, 3, 1, 1])).await.unwrap();
    let c = client();
    let (calm, bad) = (&web.roots()[0], &web.roots()[1]);
    let r = c.get(calm).send().await.unwrap();
    assert_eq!(r.headers()["location"], "/p/0");
    let status = |u: String| {
        let c = c.clone();
        async move { c.get(&u).send().await.unwrap() }
    };
    let r = status(format!("{calm}r/7/2")).await;
    assert_eq!(r.status(), 308);
    assert_eq!(r.headers()["location"], "/r/7/1");
    let r = status(format!("{calm}r/7/0")).await;
    assert_eq!(r.headers()["location"], "/p/7");
    let r = status(format!("{calm}loop/2/a")).await;
    assert_eq!(r.headers()["location"], "/loop/2/b");
    assert_eq!(status(format!("{calm}p/200")).await.status(), 404);
    assert_eq!(status(format!("{calm}p/3")).await.status(), 200);
    // Host 1 is both slow and erroring here.
    let t = std::time::Instant::now();
    assert_eq!(status(format!("{bad}p/3")).await.status(), 500);
    assert!(t.elapsed() >= Duration::from_millis(30));
    assert_eq!(status(format!("{bad}p/4")).await.status(), 200);
    let robots = status(format!("{calm}robots.txt"))
        .await
        .text()
        .await
        .unwrap();
    assert!(robots.contains("Disallow: /private/"));
    let trap = status(format!("{calm}search?page=41"))
        .await
        .text()
        .await
        .unwrap();
    assert!(trap.contains("/search?page=42"));
    let e = web.config().expected();
    assert_eq!(e.pages, 400);
    assert_eq!(e.pages_ok, 400 - 20);
    // 10 near-copies a host; host 1 fails none of them (n % 10 == 3 never ends in 19).
    assert_eq!(e.near_copies, 20);
}

/// A breadth-first walk of the links, one request at a time, reaches every page of every
/// host exactly once: the tree links make the whole web reachable from the roots.
#[tokio::test]
async fn every_page_is_reachable_from_the_roots() {
    let web = Web::start(small(600, 3, [127, 3, 2, 1])).await.unwrap();
    let c = client();
    let mut seen: HashSet<String> = web.roots().into_iter().map(|r| r + "p/0").collect();
    let mut todo: VecDeque<String> = seen.iter().cloned().collect();
    let mut ok = 0;
    while let Some(u) = todo.pop_front() {
        let r = c.get(&u).send().await.unwrap();
        let origin = u.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
        if r.status() == 200 {
            ok += 1;
        }
        let body = r.text().await.unwrap();
        for l in hrefs(&body) {
            let abs = if l.starts_with('/') {
                format!("{origin}{l}")
            } else {
                l
            };
            // Pages only: the walk checks reachability, not the traps.
            let path = abs.splitn(4, '/').nth(3).unwrap_or("");
            let is_page = path
                .strip_prefix("p/")
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n < 200);
            if is_page && seen.insert(abs.clone()) {
                todo.push_back(abs);
            }
        }
    }
    let s = web.stats();
    assert_eq!(s.pages_fetched, web.config().expected().pages);
    assert_eq!(s.pages_fetched_again, 0);
    assert_eq!(s.max_in_flight_per_host, 1);
    assert_eq!(ok, web.config().expected().pages_ok);
}
