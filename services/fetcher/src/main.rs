//! `trawl-fetcher`: the fetcher as a service. The cluster runtime (NATS JetStream and Redis)
//! is not built yet; `trawl crawl` runs this stage embedded.

fn main() {
    eprintln!(
        "trawl-fetcher {}: the cluster runtime is not built yet; run `trawl crawl` for the \
         embedded crawler",
        env!("CARGO_PKG_VERSION")
    );
    std::process::exit(2);
}
