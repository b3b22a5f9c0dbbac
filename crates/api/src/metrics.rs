//! `/metrics` of `trawl serve`, in Prometheus' text format: answers by route and status,
//! time spent per route, pages scraped, jobs running.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    answers: BTreeMap<(String, u16), u64>,
    seconds: BTreeMap<String, (f64, u64)>,
    scraped: u64,
}

impl Metrics {
    pub fn observe(&self, route: &str, status: u16, took: Duration) {
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *m.answers.entry((route.to_string(), status)).or_default() += 1;
        let s = m.seconds.entry(route.to_string()).or_default();
        s.0 += took.as_secs_f64();
        s.1 += 1;
    }

    pub fn scraped(&self, n: u64) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).scraped += n;
    }

    pub fn render(&self, jobs_running: usize) -> String {
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        out.push_str("# TYPE trawl_api_requests_total counter\n");
        for ((route, status), n) in &m.answers {
            let _ = writeln!(
                out,
                "trawl_api_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        out.push_str("# TYPE trawl_api_request_duration_seconds summary\n");
        for (route, (sum, count)) in &m.seconds {
            let _ = writeln!(
                out,
                "trawl_api_request_duration_seconds_sum{{route=\"{route}\"}} {sum}"
            );
            let _ = writeln!(
                out,
                "trawl_api_request_duration_seconds_count{{route=\"{route}\"}} {count}"
            );
        }
        out.push_str("# TYPE trawl_api_scrape_pages_total counter\n");
        let _ = writeln!(out, "trawl_api_scrape_pages_total {}", m.scraped);
        out.push_str("# TYPE trawl_api_jobs_running gauge\n");
        let _ = writeln!(out, "trawl_api_jobs_running {jobs_running}");
        out
    }
}
