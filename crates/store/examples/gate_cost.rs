//! What the page gates cost a page in memory and in their file (`gate.db`): time a page
//! and the process's peak resident memory, for N pages whose prints and ids look like a
//! crawl's (one in ten a near-copy of an earlier page, ids of 45 to 60 bytes). The MinHash
//! modes show each gate a 120-word text's sketch (one in ten an earlier text with one to
//! three words changed); making the sketches is not counted in the time a page.
//!
//! ```text
//! cargo run --release -p trawl-store --example gate_cost -- memory 1000000
//! cargo run --release -p trawl-store --example gate_cost -- file 1000000 /tmp/gate-dir
//! cargo run --release -p trawl-store --example gate_cost -- min-memory 1000000
//! cargo run --release -p trawl-store --example gate_cost -- min-file 1000000 /tmp/gate-dir
//! ```
//!
//! One store a run, so each peak is its own.

use std::time::Instant;

use trawl_dedup::minhash::{MinHasher, MinSketch};
use trawl_dedup::{Fingerprint, GateVerdict, MemoryGate, MemoryMinGate, MinGate, SimGate};
use trawl_store::gate_file::{GATE_FILE, GateFile};
use trawl_store::sketch_file::SketchFile;

type Check<'a> = dyn FnMut(Fingerprint, &str) -> anyhow::Result<GateVerdict> + 'a;

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Pages {
    x: u64,
    made: Vec<u64>,
    i: u64,
}

impl Pages {
    fn next_u64(&mut self) -> u64 {
        self.x ^= self.x << 13;
        self.x ^= self.x >> 7;
        self.x ^= self.x << 17;
        self.x
    }

    fn next(&mut self) -> (Fingerprint, String) {
        let r = self.next_u64();
        let simhash = if r.is_multiple_of(10) && !self.made.is_empty() {
            let pick = self.next_u64() as usize % self.made.len();
            let base = self.made[pick];
            base ^ (1 << (self.next_u64() % 64))
        } else {
            self.next_u64()
        };
        // A sample of earlier prints is enough to draw near-copies from.
        if self.made.len() < 100_000 {
            self.made.push(simhash);
        }
        self.i += 1;
        let fp = Fingerprint {
            simhash,
            exact: u128::from(self.next_u64()) << 64 | u128::from(self.i),
        };
        let id = format!("http://127.0.{}.1/p/{}/{:x}", r % 20, self.i, r >> 40);
        (fp, id)
    }
}

/// The gate file's size, whole and a page.
fn print_file_size(which: &str, path: &std::path::Path, n: u64) -> anyhow::Result<()> {
    let bytes = std::fs::metadata(path)?.len();
    println!(
        "{which}: {} is {} MB ({:.0} bytes a page)",
        path.display(),
        bytes / 1_000_000,
        bytes as f64 / n as f64
    );
    Ok(())
}

/// 120-word texts from a seed, a tenth of them an earlier text with words changed.
fn texts(pages: &mut Pages, hasher: &MinHasher) -> MinSketch {
    let r = pages.next_u64();
    let (seed, changes) = if r.is_multiple_of(10) && !pages.made.is_empty() {
        let pick = pages.next_u64() as usize % pages.made.len();
        let base = pages.made[pick];
        (base, 1 + pages.next_u64() % 3)
    } else {
        let seed = pages.next_u64();
        if pages.made.len() < 100_000 {
            pages.made.push(seed);
        }
        (seed, 0)
    };
    // splitmix64: a stream of its own for each seed (the seeds are consecutive outputs of
    // the page generator's xorshift, whose stream would make neighbours near-copies).
    let mut x = seed;
    let mut words: Vec<String> = (0..120)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            format!("w{}", (z ^ (z >> 31)) % 50_000)
        })
        .collect();
    for c in 0..changes {
        let at = pages.next_u64() as usize % words.len();
        words[at] = format!("changed{c}");
    }
    hasher.sketch(&words.join(" "))
}

fn minhash(which: &str, n: u64, dir: &str) -> anyhow::Result<()> {
    let hasher = MinHasher::default();
    let mut pages = Pages {
        x: 0x9E37_79B9_7F4A_7C15,
        made: Vec::new(),
        i: 0,
    };
    let path = std::path::Path::new(dir).join(GATE_FILE);
    let memory_gate;
    let file_gate;
    type MinCheck<'a> = dyn FnMut(&MinSketch, &str) -> anyhow::Result<GateVerdict> + 'a;
    let mut check: Box<MinCheck> = if which == "min-memory" {
        memory_gate = MemoryMinGate::new(0.8);
        Box::new(|sk, id| Ok(memory_gate.check_and_insert_sync(sk, id)))
    } else {
        file_gate = MinGate::with_store(SketchFile::create(&path)?, 0.8);
        Box::new(|sk, id| Ok(file_gate.try_check_and_insert(sk, id)?))
    };
    let base = peak_rss_kib();
    let (mut gated, mut copies) = (0.0f64, 0u64);
    for i in 1..=n {
        let sk = texts(&mut pages, &hasher);
        let id = format!("http://127.0.{}.1/p/{i}/{:x}", i % 20, i * 2_654_435_761);
        let t = Instant::now();
        copies += u64::from(check(&sk, &id)? != GateVerdict::Kept);
        gated += t.elapsed().as_secs_f64();
    }
    println!(
        "{which}: {n} pages, {:.1} us a check, {copies} copies, peak RSS {} MiB ({:.0} bytes a page over the start)",
        gated * 1e6 / n as f64,
        peak_rss_kib() / 1024,
        (peak_rss_kib().saturating_sub(base) * 1024) as f64 / n as f64
    );
    if which == "min-file" {
        print_file_size(which, &path, n)?;
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args.first().map_or("memory", String::as_str);
    let n: u64 = args.get(1).map_or(Ok(1_000_000), |s| s.parse())?;
    if which.starts_with("min-") {
        return minhash(which, n, args.get(2).map_or("/tmp", String::as_str));
    }
    let mut pages = Pages {
        x: 0x9E37_79B9_7F4A_7C15,
        made: Vec::new(),
        i: 0,
    };
    let mut file_path = None;
    let file_gate;
    let memory_gate;
    let mut check: Box<Check> = match which {
        "memory" => {
            memory_gate = MemoryGate::new(2);
            Box::new(|fp, id| Ok(memory_gate.check_and_insert_sync(fp, id)))
        }
        "file" => {
            let dir = args.get(2).map_or("/tmp", String::as_str);
            let path = std::path::Path::new(dir).join(GATE_FILE);
            file_path = Some(path.clone());
            file_gate = SimGate::with_store(GateFile::create(&path)?, 2);
            Box::new(|fp, id| Ok(file_gate.try_check_and_insert(fp, id)?))
        }
        other => anyhow::bail!("memory or file, not {other}"),
    };
    let base = peak_rss_kib();
    let start = Instant::now();
    let mut copies = 0u64;
    let mut lap = Instant::now();
    for i in 1..=n {
        let (fp, id) = pages.next();
        copies += u64::from(check(fp, &id)? != GateVerdict::Kept);
        if i % (n / 4).max(1) == 0 {
            println!(
                "{which}: {i} pages, {:.1} us a page over the last quarter, peak RSS {} MiB",
                lap.elapsed().as_secs_f64() * 1e6 / (n / 4).max(1) as f64,
                peak_rss_kib() / 1024
            );
            lap = Instant::now();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{which}: {n} pages in {secs:.1} s ({:.1} us a page), {copies} copies, peak RSS {} MiB ({:.0} bytes a page over the start)",
        secs * 1e6 / n as f64,
        peak_rss_kib() / 1024,
        (peak_rss_kib().saturating_sub(base) * 1024) as f64 / n as f64
    );
    if let Some(path) = file_path {
        print_file_size(which, &path, n)?;
    }
    Ok(())
}
