//! One system Chromium, started on first use and started again when it crashes, hangs,
//! grows past its memory budget or has rendered its share of pages.
//!
//! Renders hold a read lock on the running browser; a restart takes the write lock, so it
//! waits for the pages in progress (each bounded by its own deadline) and no page sees its
//! browser vanish under it, except by a crash.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
use futures_util::StreamExt;
use tokio::sync::{RwLock, RwLockReadGuard};

use crate::RenderError;

/// Switches on top of chromiumoxide's defaults, without their leading dashes (the
/// builder adds them; a `--name=value` string would become a switch nobody reads). The
/// browser resolves and connects nothing itself: every request is intercepted and answered
/// by trawl (the fetcher's checks, its client, its WARC records); host resolution off and
/// a proxy on the discard port (loopback included) are the walls behind that, for what
/// interception may not see (workers, WebSockets); frames of other sites stay in the
/// page's process, where the tab's interception sees their requests.
const SWITCHES: &[&str] = &[
    "dns-prefetch-disable",
    "disable-background-networking",
    "disable-component-update",
    "disable-domain-reliability",
    "no-pings",
    "mute-audio",
    "disable-gpu",
    "disable-site-isolation-trials",
];

const VALUED: &[(&str, &str)] = &[
    ("host-resolver-rules", "MAP * ~NOTFOUND"),
    ("proxy-server", "http://127.0.0.1:9"),
    ("proxy-bypass-list", "<-loopback>"),
    ("blink-settings", "imagesEnabled=false"),
    ("js-flags", "--max-old-space-size=512"),
    ("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
    ("disable-features", "IsolateOrigins,SitePerProcess"),
];

/// The DevTools protocol revision chromiumoxide 0.9.1's types were generated from
/// (`chromiumoxide_cdp::CURRENT_REVISION`), logged beside the browser's own version.
const CDP_REVISION: u32 = 1_566_079;

/// Names of Chromium builds, in the order they are looked for on `PATH`.
const NAMES: &[&str] = &[
    "chromium-headless-shell",
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];

/// The browser to drive: `configured`, else `CHROME`, else the first of [`NAMES`] on
/// `PATH` (Debian's headless shell also where its package puts it).
pub fn find_chromium(configured: Option<&Path>) -> Option<PathBuf> {
    // A path given is used as given (its wrapper may be wanted); one found is unwrapped.
    if let Some(p) = configured {
        return p.is_file().then(|| p.to_path_buf());
    }
    let found = if let Some(c) = std::env::var_os("CHROME").filter(|c| !c.is_empty()) {
        let p = PathBuf::from(c);
        return which(&p).or_else(|| p.is_file().then_some(p));
    } else {
        NAMES.iter().find_map(|n| which(Path::new(n))).or_else(|| {
            let p = PathBuf::from("/usr/lib/chromium/chromium-headless-shell");
            p.is_file().then_some(p)
        })
    };
    found.map(unwrap_launcher)
}

/// The binary a launcher script runs (Debian's `/usr/bin/chromium-headless-shell` is
/// `#!/bin/sh` running `/usr/lib/chromium/chromium-headless-shell "$@"` as its child): the
/// browser must be the process trawl starts, so that killing it kills the browser.
fn unwrap_launcher(path: PathBuf) -> PathBuf {
    let Ok(bytes) = std::fs::read(&path) else {
        return path;
    };
    if !bytes.starts_with(b"#!") || bytes.len() > 64 << 10 {
        return path;
    }
    let text = String::from_utf8_lossy(&bytes);
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.split_whitespace())
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| w.starts_with('/') && w.contains("chrom"))
        .map(PathBuf::from)
        .find(|p| p != &path && executable(p))
        .unwrap_or(path)
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn which(name: &Path) -> Option<PathBuf> {
    if name.components().count() > 1 {
        return name.is_file().then(|| name.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// When the browser is started again.
#[derive(Debug, Clone)]
pub struct BrowserLimits {
    /// Pages rendered before a fresh browser (a browser's memory creeps up).
    pub pages: u32,
    /// Resident memory of the browser's processes, all of them, past which it is
    /// restarted once its pages are done.
    pub rss_bytes: u64,
    /// How long a DevTools command may take before the browser counts as hung.
    pub command_timeout: Duration,
    /// Start Chromium without its sandbox (the `chromium_no_sandbox` setting: the container
    /// is the sandbox); root always does, as Chromium refuses its sandbox there.
    pub no_sandbox: bool,
}

impl Default for BrowserLimits {
    fn default() -> Self {
        BrowserLimits {
            pages: 200,
            rss_bytes: 1536 << 20,
            command_timeout: Duration::from_secs(10),
            no_sandbox: false,
        }
    }
}

pub(crate) struct Live {
    pub(crate) browser: Browser,
    handler: tokio::task::JoinHandle<()>,
    /// The handler's connection ended: the browser is gone.
    dead: Arc<AtomicBool>,
    /// The browser's own profile directory, removed with it.
    profile: PathBuf,
    rendered: AtomicU32,
    /// Set by a render that saw the browser hang: restart before the next page.
    pub(crate) hung: AtomicBool,
    pid: Option<u32>,
    pub(crate) command_timeout: Duration,
}

impl Live {
    pub(crate) fn mark_rendered(&self) {
        self.rendered.fetch_add(1, Ordering::Relaxed);
    }

    fn worn(&self, limits: &BrowserLimits) -> Option<String> {
        if self.dead.load(Ordering::Relaxed) || self.pid.is_some_and(|p| !alive(p)) {
            return Some("the browser exited or its connection closed (crashed or killed)".into());
        }
        if self.hung.load(Ordering::Relaxed) {
            return Some("a DevTools command timed out (hung)".into());
        }
        if self.rendered.load(Ordering::Relaxed) >= limits.pages {
            return Some(format!("{} pages rendered", limits.pages));
        }
        let rss = self.pid.map_or(0, tree_rss);
        (rss > limits.rss_bytes).then(|| format!("{} MiB resident", rss >> 20))
    }
}

/// The renderer's browser.
pub struct Pool {
    exe: PathBuf,
    limits: BrowserLimits,
    live: RwLock<Option<Live>>,
    restarts: AtomicU32,
    version: std::sync::Mutex<Option<String>>,
}

impl Pool {
    pub fn new(exe: PathBuf, limits: BrowserLimits) -> Self {
        Pool {
            exe,
            limits,
            live: RwLock::new(None),
            restarts: AtomicU32::new(0),
            version: Default::default(),
        }
    }

    /// Browsers started after the first.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// The product and protocol version the running browser reported at its start.
    pub fn version(&self) -> Option<String> {
        self.version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The running browser, started (again) first when there is none or it is worn out.
    pub(crate) async fn get(&self) -> Result<RwLockReadGuard<'_, Option<Live>>, RenderError> {
        {
            let guard = self.live.read().await;
            if guard
                .as_ref()
                .is_some_and(|l| l.worn(&self.limits).is_none())
            {
                return Ok(guard);
            }
        }
        let mut w = self.live.write().await;
        let why = match w.as_ref() {
            Some(l) => l.worn(&self.limits),
            None => Some(String::new()),
        };
        if let Some(why) = why {
            if let Some(old) = w.take() {
                tracing::info!(reason = %why, "restarting the browser");
                self.restarts.fetch_add(1, Ordering::Relaxed);
                shut(old).await;
            }
            *w = Some(self.launch().await?);
        }
        Ok(w.downgrade())
    }

    async fn launch(&self) -> Result<Live, RenderError> {
        // A profile of its own: concurrent crawls (and a full Chromium's singleton lock)
        // never share one.
        let profile = std::env::temp_dir().join(format!("trawl-chromium-{}", uuid::Uuid::new_v4()));
        let mut config = BrowserConfig::builder()
            .chrome_executable(&self.exe)
            .user_data_dir(&profile)
            .args(SWITCHES.iter().copied())
            .args(VALUED.iter().copied());
        let no_sandbox = self.limits.no_sandbox || is_root();
        if no_sandbox {
            config = config.no_sandbox();
        }
        let config = config
            .request_timeout(self.limits.command_timeout)
            .launch_timeout(Duration::from_secs(30))
            .build()
            .map_err(RenderError::Browser)?;
        let (mut browser, mut handler) = match Browser::launch(config).await {
            Ok(b) => b,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&profile);
                let hint = if no_sandbox {
                    ""
                } else {
                    " (no usable sandbox? set chromium_no_sandbox, TRAWL_CHROMIUM_NO_SANDBOX=1, where a container isolates it)"
                };
                return Err(RenderError::Browser(format!(
                    "{}: {e}{hint}",
                    self.exe.display()
                )));
            }
        };
        let dead = Arc::new(AtomicBool::new(false));
        let flag = dead.clone();
        // Messages a newer Chromium sends that this protocol revision cannot decode are
        // logged and skipped: one bad message must not end the connection.
        let handler = tokio::spawn(async move {
            while let Some(event) = handler.next().await {
                match event {
                    Ok(()) => {}
                    Err(chromiumoxide::error::CdpError::InvalidMessage(..)) => {
                        tracing::debug!("a DevTools message this protocol revision cannot read");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the browser's DevTools connection failed");
                        break;
                    }
                }
            }
            flag.store(true, Ordering::Relaxed);
        });
        let pid = browser.get_mut_child().and_then(|c| c.as_mut_inner().id());
        let version =
            match tokio::time::timeout(self.limits.command_timeout, browser.version()).await {
                Ok(Ok(v)) => format!("{} (protocol {})", v.product, v.protocol_version),
                _ => "unknown".into(),
            };
        tracing::info!(
            browser = %self.exe.display(),
            %version,
            cdp_revision = CDP_REVISION,
            "browser started"
        );
        *self.version.lock().unwrap_or_else(|e| e.into_inner()) = Some(version);
        Ok(Live {
            browser,
            handler,
            dead,
            profile,
            rendered: AtomicU32::new(0),
            hung: AtomicBool::new(false),
            pid,
            command_timeout: self.limits.command_timeout,
        })
    }

    /// The running browser's process id (none before the first page).
    pub async fn pid(&self) -> Option<u32> {
        self.live.read().await.as_ref().and_then(|l| l.pid)
    }

    /// Closes the browser (at the end of the stage).
    pub async fn close(&self) {
        if let Some(l) = self.live.write().await.take() {
            shut(l).await;
        }
    }
}

/// Asks the browser to close, then kills it and every process it started: a hung one
/// does not answer, and its renderers must not outlive it.
async fn shut(mut l: Live) {
    // Its processes first: once it has exited, they belong to whoever adopts them.
    let left = l.pid.map(tree_pids).unwrap_or_default();
    let _ = tokio::time::timeout(Duration::from_secs(2), l.browser.close()).await;
    if tokio::time::timeout(Duration::from_secs(2), l.browser.wait())
        .await
        .is_err()
    {
        let _ = l.browser.kill().await;
    }
    let left: Vec<u32> = left.into_iter().filter(|&p| Some(p) != l.pid).collect();
    for &pid in &left {
        // SAFETY: kill(2) on a pid read from /proc as a descendant of the browser; a pid
        // reused since is at worst sent a signal it did not expect from us.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    }
    // Orphans are re-parented to PID 1, which in a container is this process: reap the
    // ones that came to us (only these pids: the browser itself is tokio's to reap).
    for _ in 0..20 {
        let mut pending = false;
        for &pid in &left {
            let mut status = 0;
            // SAFETY: waitpid(2) with WNOHANG on one pid; ECHILD when it is not ours.
            let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
            pending |= r == 0;
        }
        if !pending {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    l.handler.abort();
    let _ = std::fs::remove_dir_all(&l.profile);
}

/// Chromium's sandbox needs a non-root user with user namespaces (or its setuid helper):
/// off as root, where Chromium refuses to start sandboxed.
fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Resident bytes of `pid` and all its descendants (Chromium runs a process per
/// renderer), from `/proc`; 0 where there is no `/proc`.
pub fn tree_rss(pid: u32) -> u64 {
    let (parent, rss) = processes();
    descendants(pid, &parent)
        .iter()
        .map(|p| rss.get(p).copied().unwrap_or(0))
        .sum()
}

/// Whether `pid` runs (a zombie, exited but not yet reaped, does not).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| !matches!(state, "Z" | "X")),
        // No /proc (not Linux): the connection's state is all there is.
        Err(_) => !std::path::Path::new("/proc/self").exists(),
    }
}

/// `pid` and its descendants.
fn tree_pids(pid: u32) -> Vec<u32> {
    descendants(pid, &processes().0)
}

fn descendants(pid: u32, parent: &std::collections::HashMap<u32, u32>) -> Vec<u32> {
    parent
        .keys()
        .copied()
        .filter(|&p| {
            let mut cur = p;
            for _ in 0..64 {
                if cur == pid {
                    return true;
                }
                match parent.get(&cur) {
                    Some(&pp) if pp != 0 && pp != cur => cur = pp,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

/// Every process's parent and resident bytes, from `/proc`.
type ProcTable = (
    std::collections::HashMap<u32, u32>,
    std::collections::HashMap<u32, u64>,
);

fn processes() -> ProcTable {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Default::default();
    };
    let mut parent: std::collections::HashMap<u32, u32> = Default::default();
    let mut rss: std::collections::HashMap<u32, u64> = Default::default();
    for e in dir.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces) in parentheses.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if let (Some(pp), Some(pages)) = (f.get(1), f.get(21)) {
            parent.insert(p, pp.parse().unwrap_or(0));
            rss.insert(p, pages.parse::<u64>().unwrap_or(0) * 4096);
        }
    }
    (parent, rss)
}
