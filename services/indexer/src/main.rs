//! `trawl-indexer`: the indexer as a service. The cluster runtime (NATS JetStream and Redis)
//! is not built yet; `trawl crawl` runs this stage embedded.

fn main() {
    eprintln!(
        "trawl-indexer {}: the cluster runtime is not built yet; run `trawl crawl` for the \
         embedded crawler",
        env!("CARGO_PKG_VERSION")
    );
    std::process::exit(2);
}
