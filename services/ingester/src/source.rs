//! Where an archive's bytes come from: a path the ingester can read, or an http(s) URL
//! downloaded (streamed to a file beside the service's outputs, removed when done).

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use trawl_corpus::ingest::is_url;

/// An archive on this machine's disk; a downloaded one is removed on drop.
pub struct Located {
    pub path: PathBuf,
    downloaded: bool,
}

impl Drop for Located {
    fn drop(&mut self) {
        if self.downloaded {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The archive named by `source`, downloaded into `dir` when it is a URL. The error is the
/// reason an archive that keeps failing is dead-lettered with.
pub async fn locate(source: &str, dir: &Path, client: &reqwest::Client) -> Result<Located, String> {
    if !is_url(source) {
        let path = PathBuf::from(source);
        return match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => Ok(Located {
                path,
                downloaded: false,
            }),
            Ok(_) => Err(format!("{source}: not a file")),
            Err(e) => Err(format!("{source}: {e}")),
        };
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let name = source
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty() && !n.contains(['?', '#']))
        .unwrap_or("archive");
    // Two replicas on one volume, or one archive taken over: a name of its own.
    let path = dir.join(format!(
        "{}-{}-{name}",
        std::process::id(),
        trawl_core::clock::now_ms()
    ));
    let located = Located {
        path,
        downloaded: true,
    };
    let mut resp = client
        .get(source)
        .send()
        .await
        .map_err(|e| format!("download: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("download: HTTP {}", resp.status().as_u16()));
    }
    let mut f = tokio::fs::File::create(&located.path)
        .await
        .map_err(|e| format!("{}: {e}", located.path.display()))?;
    while let Some(chunk) = resp.chunk().await.map_err(|e| format!("download: {e}"))? {
        f.write_all(&chunk)
            .await
            .map_err(|e| format!("writing the download: {e}"))?;
    }
    f.flush()
        .await
        .map_err(|e| format!("writing the download: {e}"))?;
    Ok(located)
}

/// The client downloads go through: connect and read deadlines, no overall one (a Common
/// Crawl WARC file is a gigabyte).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(20))
        .read_timeout(Duration::from_secs(60))
        .user_agent(concat!("trawl-ingester/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}
