//! `trawl mcp`: the server's work as Model Context Protocol tools, over stdio or streamable
//! HTTP (`rmcp`, the official Rust SDK), with no Node. Each tool is one request to the API's
//! own router in this process, so it runs with the same checks, limits and jobs as
//! `trawl serve`; what comes back is cut to fit an agent's context: Markdown in pages of
//! `maxChars` (the next `offset` said), job results a few documents at a time (the next
//! `skip` said), and the whole result by reference (the job's `pages.jsonl`).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use tower::ServiceExt;

use anyhow::Context;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::{App, ServeConfig};

/// Markdown characters a tool answers at most by default, and at most when asked.
const DEFAULT_CHARS: usize = 20_000;
const MAX_CHARS: usize = 100_000;

/// Documents of a job a status answers by default, and the Markdown kept of each.
const DEFAULT_DOCS: usize = 10;
const DOC_CHARS: usize = 2_000;

#[derive(Clone)]
pub struct Mcp {
    app: Arc<App>,
    router: axum::Router,
    tools: Arc<Vec<Tool>>,
    /// The client is this machine's user (stdio): `changes` may read a crawl directory.
    local: bool,
    /// The key the tools' requests carry (the server's first, when it has keys).
    key: Option<String>,
}

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

fn tool(name: &'static str, description: &'static str, props: Value, required: &[&str]) -> Tool {
    Tool::new(
        name,
        description,
        schema(json!({"type": "object", "properties": props, "required": required})),
    )
}

fn tools() -> Vec<Tool> {
    let page = json!({
        "offset": {"type": "integer", "minimum": 0, "description": "Characters of the Markdown to skip (the previous answer's nextOffset)."},
        "maxChars": {"type": "integer", "minimum": 1, "maximum": MAX_CHARS, "description": "Markdown characters to return."}
    });
    let job_page = json!({
        "id": {"type": "string"},
        "skip": {"type": "integer", "minimum": 0, "description": "Documents to skip (the previous answer's nextSkip)."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100}
    });
    let mut scrape = json!({
        "url": {"type": "string", "description": "An absolute http(s) URL."},
        "formats": {"type": "array", "items": {"type": "string"}, "description": "markdown (default), html, rawHtml, links, images, summary."},
        "onlyMainContent": {"type": "boolean"},
        "maxAge": {"type": "integer", "description": "Milliseconds: an earlier scrape this young answers (0: always fetch)."}
    });
    if let (Some(s), Some(p)) = (scrape.as_object_mut(), page.as_object()) {
        s.extend(p.clone());
    }
    vec![
        tool(
            "scrape",
            "Scrape one page to Markdown and metadata (long pages come in parts: pass nextOffset as offset).",
            scrape,
            &["url"],
        ),
        tool(
            "map",
            "List a site's URLs from its sitemaps and links, matching URLs first when search is given.",
            json!({
                "url": {"type": "string"}, "search": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100000},
                "skip": {"type": "integer", "minimum": 0}
            }),
            &["url"],
        ),
        tool(
            "crawl",
            "Start crawling a site; answers the job's id for crawl_status.",
            json!({
                "url": {"type": "string"}, "limit": {"type": "integer", "minimum": 1},
                "maxDiscoveryDepth": {"type": "integer", "minimum": 0},
                "includePaths": {"type": "array", "items": {"type": "string"}},
                "excludePaths": {"type": "array", "items": {"type": "string"}}
            }),
            &["url"],
        ),
        tool(
            "crawl_status",
            "A crawl's progress and a few of its documents (pass nextSkip as skip for more); pagesFile holds them all.",
            job_page.clone(),
            &["id"],
        ),
        tool(
            "batch_scrape",
            "Start scraping a list of URLs; answers the job's id for batch_status.",
            json!({
                "urls": {"type": "array", "items": {"type": "string"}, "minItems": 1}
            }),
            &["urls"],
        ),
        tool(
            "batch_status",
            "A batch's progress and a few of its documents (pass nextSkip as skip for more).",
            job_page,
            &["id"],
        ),
        tool(
            "search",
            "Search the pages this server crawled (its indexes, hybrid search): one result per page.",
            json!({
                "query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 100}
            }),
            &["query"],
        ),
        tool(
            "changes",
            "What changed: a monitor's latest (or given) check, the pages new, changed or removed with their diffs; or a re-crawl's changes.jsonl.",
            json!({
                "monitorId": {"type": "string"}, "checkId": {"type": "string"},
                "crawlDir": {"type": "string", "description": "A trawl crawl or watch directory with a changes.jsonl."},
                "skip": {"type": "integer", "minimum": 0}, "limit": {"type": "integer", "minimum": 1, "maximum": 100}
            }),
            &[],
        ),
        tool(
            "extract",
            "Read pages into one JSON answer with the configured model; answers the job's id for extract_status.",
            json!({
                "urls": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "prompt": {"type": "string"}, "schema": {"type": "object"}
            }),
            &["urls"],
        ),
        tool(
            "extract_status",
            "An extract job's status and, once completed, its answer.",
            json!({"id": {"type": "string"}}),
            &["id"],
        ),
    ]
}

/// `text` from `offset`, at most `max` characters, and where the next part starts.
fn window(text: &str, offset: usize, max: usize) -> (String, Option<usize>) {
    let total = text.chars().count();
    let part: String = text.chars().skip(offset).take(max).collect();
    let end = offset + part.chars().count();
    (part, (end < total).then_some(end))
}

fn num(args: &JsonObject, k: &str) -> Option<usize> {
    args.get(k).and_then(Value::as_u64).map(|n| n as usize)
}

/// The request body made of the arguments named `keys` that were given.
fn pick(args: &JsonObject, keys: &[&str]) -> Value {
    Value::Object(
        keys.iter()
            .filter_map(|k| args.get(*k).map(|v| (k.to_string(), v.clone())))
            .collect(),
    )
}

/// The `id` argument, a job's id (it goes into a path: nothing else passes).
fn job_id(args: &JsonObject) -> Result<String, String> {
    let id = text(args, "id")?;
    uuid::Uuid::parse_str(&id).map_err(|_| format!("{id:?} is not a job id"))?;
    Ok(id)
}

fn text(args: &JsonObject, k: &str) -> Result<String, String> {
    args.get(k)
        .and_then(Value::as_str)
        .map(String::from)
        .ok_or_else(|| format!("{k} is required (a string)"))
}

impl Mcp {
    pub fn new(app: Arc<App>, local: bool) -> Self {
        let router = super::router(app.clone());
        let key = app
            .args
            .api_keys
            .iter()
            .map(|k| k.trim())
            .find(|k| !k.is_empty())
            .map(String::from);
        Self {
            app,
            router,
            tools: Arc::new(tools()),
            local,
            key,
        }
    }

    /// One request to the API in this process: its JSON answer, or its error's message.
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value, String> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "localhost");
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        if let Some(k) = &self.key {
            req = req.header("authorization", format!("Bearer {k}"));
        }
        let req = req
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
            .map_err(|e| e.to_string())?;
        let res = self
            .router
            .clone()
            .oneshot(req)
            .await
            .map_err(|e| e.to_string())?;
        let bytes = axum::body::to_bytes(res.into_body(), 256 << 20)
            .await
            .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        if v["success"] == false {
            let code = v["code"]
                .as_str()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            return Err(format!(
                "{}{code}",
                v["error"].as_str().unwrap_or("the request failed")
            ));
        }
        Ok(v)
    }

    async fn run(&self, name: &str, args: &JsonObject) -> Result<Value, String> {
        match name {
            "scrape" => self.scrape(args).await,
            "map" => self.map(args).await,
            "crawl" => {
                text(args, "url")?;
                let body = pick(
                    args,
                    &[
                        "url",
                        "limit",
                        "maxDiscoveryDepth",
                        "includePaths",
                        "excludePaths",
                    ],
                );
                self.start("/v2/crawl", body).await
            }
            "batch_scrape" => self.start("/v2/batch/scrape", pick(args, &["urls"])).await,
            "crawl_status" => self.job_status("crawl", args).await,
            "batch_status" => self.job_status("batch/scrape", args).await,
            "search" => {
                text(args, "query")?;
                let body = pick(args, &["query", "limit"]);
                let v = self.call(Method::POST, "/v2/search", Some(body)).await?;
                Ok(json!({"results": v["data"]["web"], "warning": v.get("warning")}))
            }
            "changes" => self.changes(args).await,
            "extract" => {
                let body = pick(args, &["urls", "prompt", "schema"]);
                let v = self.call(Method::POST, "/v2/extract", Some(body)).await?;
                Ok(json!({"id": v["id"]}))
            }
            "extract_status" => {
                let id = job_id(args)?;
                let v = self
                    .call(Method::GET, &format!("/v2/extract/{id}"), None)
                    .await?;
                Ok(json!({"status": v["status"], "data": v.get("data"), "error": v.get("error")}))
            }
            other => Err(format!("no tool {other:?}")),
        }
    }

    /// The page's document, its Markdown cut to the part asked for.
    async fn scrape(&self, args: &JsonObject) -> Result<Value, String> {
        text(args, "url")?;
        let body = pick(args, &["url", "formats", "onlyMainContent", "maxAge"]);
        let v = self.call(Method::POST, "/v2/scrape", Some(body)).await?;
        let mut doc = v["data"].clone();
        let md = doc["markdown"].as_str().unwrap_or_default().to_string();
        let max = num(args, "maxChars")
            .unwrap_or(DEFAULT_CHARS)
            .clamp(1, MAX_CHARS);
        let (part, next) = window(&md, num(args, "offset").unwrap_or(0), max);
        doc["markdown"] = part.into();
        doc["totalChars"] = md.chars().count().into();
        doc["nextOffset"] = next.map_or(Value::Null, Value::from);
        Ok(doc)
    }

    /// The site's URLs, 500 a call.
    async fn map(&self, args: &JsonObject) -> Result<Value, String> {
        text(args, "url")?;
        let v = self
            .call(
                Method::POST,
                "/v2/map",
                Some(pick(args, &["url", "search", "limit"])),
            )
            .await?;
        let links = v["links"].as_array().cloned().unwrap_or_default();
        let skip = num(args, "skip").unwrap_or(0);
        let shown: Vec<Value> = links
            .iter()
            .skip(skip)
            .take(500)
            .map(|l| l["url"].clone())
            .collect();
        let next = (skip + shown.len() < links.len()).then_some(skip + shown.len());
        Ok(json!({"total": links.len(), "links": shown, "nextSkip": next}))
    }

    /// A crawl or batch started: its id.
    async fn start(&self, path: &str, body: Value) -> Result<Value, String> {
        let v = self.call(Method::POST, path, Some(body)).await?;
        Ok(json!({"id": v["id"], "invalidURLs": v.get("invalidURLs")}))
    }

    /// A job's counts and a page of its documents (`kind`: `crawl` or `batch/scrape`).
    async fn job_status(&self, kind: &str, args: &JsonObject) -> Result<Value, String> {
        let id = job_id(args)?;
        let skip = num(args, "skip").unwrap_or(0);
        let limit = num(args, "limit").unwrap_or(DEFAULT_DOCS).clamp(1, 100);
        let path = format!("/v2/{kind}/{id}?skip={skip}&limit={limit}");
        let v = self.call(Method::GET, &path, None).await?;
        let docs: Vec<Value> = v["data"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                let md = d["markdown"].as_str().unwrap_or_default();
                let (part, more) = window(md, 0, DOC_CHARS);
                json!({"url": d["metadata"]["sourceURL"], "title": d["metadata"]["title"],
                       "statusCode": d["metadata"]["statusCode"], "markdown": part,
                       "truncated": more.is_some()})
            })
            .collect();
        let shown = docs.len();
        let pages = self
            .app
            .args
            .data
            .join("jobs")
            .join(&id)
            .join("pages.jsonl");
        Ok(json!({
            "status": v["status"], "completed": v["completed"], "total": v["total"],
            "documents": docs,
            "nextSkip": v.get("next").filter(|n| !n.is_null()).map(|_| skip + shown),
            "pagesFile": pages.display().to_string(),
            "error": v.get("error"),
        }))
    }

    /// A monitor check's pages that are not `same`, or a re-crawl's change events.
    async fn changes(&self, args: &JsonObject) -> Result<Value, String> {
        let skip = num(args, "skip").unwrap_or(0);
        let limit = num(args, "limit").unwrap_or(DEFAULT_DOCS).clamp(1, 100);
        if let Some(dir) = args.get("crawlDir").and_then(Value::as_str) {
            // A path is the local user's to give: over HTTP anyone who reaches the server
            // would read any file named changes.jsonl.
            if !self.local {
                return Err(
                    "crawlDir is read by trawl mcp on stdio only; over HTTP give monitorId".into(),
                );
            }
            let dir = std::path::PathBuf::from(dir);
            return tokio::task::spawn_blocking(move || change_events(&dir, skip, limit))
                .await
                .map_err(|e| e.to_string())?;
        }
        let id = text(args, "monitorId").map_err(|_| "give monitorId or crawlDir".to_string())?;
        let check = match args.get("checkId").and_then(Value::as_str) {
            Some(c) => c.to_string(),
            None => {
                let v = self
                    .call(
                        Method::GET,
                        &format!("/v2/monitor/{id}/checks?limit=20"),
                        None,
                    )
                    .await?;
                v["data"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["status"] != "running" && c["status"] != "skipped_overlap")
                    .and_then(|c| c["id"].as_str().map(String::from))
                    .ok_or("the monitor has no finished check yet")?
            }
        };
        // Every page of the check that is not the same, read a thousand at a time.
        let mut pages = Vec::new();
        let mut from = 0usize;
        loop {
            let v = self
                .call(
                    Method::GET,
                    &format!("/v2/monitor/{id}/checks/{check}?skip={from}&limit=1000"),
                    None,
                )
                .await?;
            let got = v["data"]["pages"].as_array().cloned().unwrap_or_default();
            let empty = got.is_empty();
            from += got.len();
            pages.extend(got.into_iter().filter(|p| p["status"] != "same"));
            if empty || v["data"]["next"].is_null() {
                break;
            }
        }
        let total = pages.len();
        let shown: Vec<Value> = pages
            .into_iter()
            .skip(skip)
            .take(limit)
            .map(|mut p| {
                if let Some(t) = p["diff"]["text"].as_str() {
                    let (part, more) = window(t, 0, DOC_CHARS);
                    p["diff"] = json!({"text": part, "truncated": more.is_some()});
                }
                p
            })
            .collect();
        let next = (skip + shown.len() < total).then_some(skip + shown.len());
        Ok(
            json!({"monitorId": id, "checkId": check, "total": total, "pages": shown, "nextSkip": next}),
        )
    }
}

/// A crawl directory's change events (`changes.jsonl`, or the newest round's of a
/// `trawl watch` directory), a page of them.
fn change_events(dir: &std::path::Path, skip: usize, limit: usize) -> Result<Value, String> {
    use std::io::BufRead;
    let mut file = dir.join("changes.jsonl");
    if !file.is_file() {
        // A watch directory: its newest round's.
        let rounds = trawl_runtime::watch::generations(dir).map_err(|e| format!("{e:#}"))?;
        file = rounds
            .last()
            .map(|(_, r)| r.join("changes.jsonl"))
            .filter(|f| f.is_file())
            .ok_or_else(|| {
                format!(
                    "{} has no changes.jsonl (a re-crawl writes one)",
                    dir.display()
                )
            })?;
    }
    let f = std::fs::File::open(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut total = 0;
    let mut events = Vec::new();
    for line in std::io::BufReader::new(f).lines() {
        let line = line.map_err(|e| e.to_string())?;
        let Ok(mut e) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if total >= skip && events.len() < limit {
            if let Some(t) = e["diff"]["text"].as_str() {
                let (part, more) = window(t, 0, DOC_CHARS);
                e["diff"]["text"] = part.into();
                e["diff"]["truncated"] = (more.is_some() || e["diff"]["truncated"] == true).into();
            }
            events.push(e);
        }
        total += 1;
    }
    let next = (skip + events.len() < total).then_some(skip + events.len());
    Ok(
        json!({"file": file.display().to_string(), "total": total, "events": events, "nextSkip": next}),
    )
}

impl ServerHandler for Mcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("trawl", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "trawl crawls, scrapes and searches websites, and watches them change. Long \
                 answers come in parts: pass nextOffset or nextSkip back to read on.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items((*self.tools).clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if self.get_tool(&request.name).is_none() {
            return Err(McpError::invalid_params(
                format!("no tool {:?}", request.name),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        Ok(match self.run(&request.name, &args).await {
            Ok(v) => CallToolResult::structured(v).into(),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e)]).into(),
        })
    }
}

/// `trawl mcp`: the tools over stdin and stdout until the client goes.
pub async fn mcp_stdio(args: ServeConfig) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let (app, trigger) = super::start(args)?;
    let served = async {
        let running = Mcp::new(app.clone(), true)
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| anyhow::anyhow!("MCP over stdio: {e}"))?;
        running.waiting().await?;
        anyhow::Ok(())
    }
    .await;
    trigger.trigger();
    super::finish(&app).await;
    served
}

/// `trawl mcp --http`: the tools over streamable HTTP at `/mcp` on `listener`, the API
/// beside them, until `stop` resolves.
pub async fn mcp_http(
    listener: tokio::net::TcpListener,
    args: ServeConfig,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // The tools act for no key: a server with keys would be open through them.
    anyhow::ensure!(
        args.api_keys.is_empty(),
        "trawl mcp --http takes no API keys: its tools answer anyone who reaches it (keep it \
         on loopback, as it is by default)"
    );
    let (app, trigger) = super::start(args)?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let server = Mcp::new(app.clone(), false);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_cancellation_token(cancel.child_token()),
    );
    // The API beside the tools, as `trawl serve` gives it.
    let routes = super::router(app.clone()).nest_service("/mcp", service);
    tracing::info!(addr = %listener.local_addr()?, "trawl mcp listening at /mcp");
    axum::serve(listener, routes)
        .with_graceful_shutdown(async move {
            stop.await;
            cancel.cancel();
            trigger.trigger();
        })
        .await?;
    super::finish(&app).await;
    Ok(())
}

/// `trawl mcp --http` on its address until Ctrl-C or SIGTERM.
pub async fn mcp_http_until_stopped(args: ServeConfig) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    mcp_http(listener, args, super::stop_signal()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_page_through_text() {
        let t = "abcdefghij";
        assert_eq!(window(t, 0, 4), ("abcd".into(), Some(4)));
        assert_eq!(window(t, 8, 4), ("ij".into(), None));
        assert_eq!(window(t, 20, 4), (String::new(), None));
        assert_eq!(window("ééé", 1, 1), ("é".into(), Some(2)));
    }

    #[test]
    fn every_tool_has_an_object_schema() {
        let t = tools();
        assert_eq!(t.len(), 10);
        for tool in &t {
            assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
            assert!(tool.input_schema["properties"].is_object(), "{}", tool.name);
        }
    }
}
