//! Measurements for `bench/refine/run.sh`:
//!
//!     refine_bench render PAGES_JSONL            # render_lines CPU time per page
//!     refine_bench candle GGUF PAGES_JSONL N MAX  # the candle backend, N pages
//!     refine_bench openai URL PAGES_JSONL N MAX   # an OpenAI-compatible server, N pages
//!
//! PAGES_JSONL is `scripts/refine-reference.py`'s output (its `html` and `cpu_s` fields).
//! Prints one JSON object per run: medians over pages.

use std::io::BufRead;
use std::time::{Duration, Instant};

use trawl_refine::backend::candle::Candle;
use trawl_refine::backend::openai::{OpenAi, OpenAiConfig};
use trawl_refine::backend::{Backend, Request, Sampling};
use trawl_refine::lines::{number_lines, render_lines};

fn pages(path: &str) -> Vec<(String, f64)> {
    let f = std::io::BufReader::new(std::fs::File::open(path).expect("pages"));
    f.lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .map(|v| {
            (
                v["html"].as_str().unwrap_or_default().to_string(),
                v["cpu_s"].as_f64().unwrap_or(0.0),
            )
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

const SYSTEM: &str = "You clean web pages for a language-model corpus. Read the numbered lines and answer with a decision (<keep>, <edit>, <delete> or <rewrite>), then <extract> and one `rm A-B` line per block of boilerplate lines, then the decision again.";

/// The first `n` pages whose numbered lines fit `max_chars` (the test model has 4,096 positions).
fn prompts(path: &str, n: usize, max_chars: usize) -> Vec<String> {
    pages(path)
        .into_iter()
        .map(|(h, _)| number_lines(&render_lines(&h)))
        .filter(|p| p.len() > 200 && p.len() <= max_chars)
        .take(n)
        .collect()
}

fn run(backend: &dyn Backend, prompts: &[String], max_new: usize) -> serde_json::Value {
    let (mut wall, mut prefill, mut decode, mut out_tok, mut in_tok) =
        (vec![], vec![], vec![], 0usize, 0usize);
    for (i, p) in prompts.iter().enumerate() {
        let req = Request {
            system: SYSTEM.into(),
            page: p.clone(),
            seed: i as u64,
            max_new_tokens: max_new,
            sampling: Sampling::Greedy,
        };
        let t = Instant::now();
        let Ok(r) = backend.generate(&req) else {
            continue;
        };
        let w = t.elapsed().as_secs_f64();
        wall.push(w);
        out_tok += r.completion_tokens;
        in_tok += r.prompt_tokens;
        if r.decode_s > 0.0 && r.completion_tokens > 1 {
            decode.push((r.completion_tokens - 1) as f64 / r.decode_s);
            prefill.push(r.prompt_tokens as f64 / r.prefill_s.max(1e-9));
        }
    }
    let total: f64 = wall.iter().sum();
    serde_json::json!({
        "backend": backend.name(),
        "pages": wall.len(),
        "prompt_tokens": in_tok,
        "completion_tokens": out_tok,
        "median_s_per_page": median(wall),
        "tokens_per_s_end_to_end": (in_tok + out_tok) as f64 / total.max(1e-9),
        "completion_tokens_per_s": out_tok as f64 / total.max(1e-9),
        "median_prefill_tokens_per_s": median(prefill),
        "median_decode_tokens_per_s": median(decode),
    })
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    match a.first().map(String::as_str) {
        Some("render") => {
            let ps = pages(&a[1]);
            let (mut ours, mut theirs) = (vec![], vec![]);
            for (h, py) in &ps {
                let t = thread_cpu();
                let l = render_lines(h);
                ours.push(thread_cpu() - t);
                std::hint::black_box(l);
                theirs.push(*py);
            }
            let (o, t) = (median(ours.clone()), median(theirs.clone()));
            println!(
                "{}",
                serde_json::json!({"pages": ps.len(), "trawl_median_ms": o * 1e3, "mineru_webkit_median_ms": t * 1e3,
                    "trawl_pages_per_cpu_s": ps.len() as f64 / ours.iter().sum::<f64>(),
                    "mineru_webkit_pages_per_cpu_s": ps.len() as f64 / theirs.iter().sum::<f64>(),
                    "speedup_median": t / o.max(1e-12)})
            );
        }
        Some("candle") => {
            let m = Candle::load(std::path::Path::new(&a[1])).expect("model");
            let ps = prompts(&a[2], a[3].parse().unwrap_or(6), 2000);
            println!("{}", run(&m, &ps, a[4].parse().unwrap_or(64)));
        }
        Some("openai") => {
            let c = OpenAi::new(OpenAiConfig {
                base_url: a[1].clone(),
                model: "bench".into(),
                api_key: None,
                timeout: Duration::from_secs(600),
                retries: 1,
                context_length: None,
            })
            .expect("client");
            let ps = prompts(&a[2], a[3].parse().unwrap_or(6), 2000);
            println!("{}", run(&c, &ps, a[4].parse().unwrap_or(64)));
        }
        _ => eprintln!("usage: refine_bench render|candle|openai ..."),
    }
}
