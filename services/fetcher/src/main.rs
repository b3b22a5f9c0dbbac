//! `trawl-fetcher`: the fetcher stage as a service, once the cluster runtime lands.

fn main() {
    trawl_core::cluster_runtime_pending("trawl-fetcher");
}
