//! `/v2/parse`: an uploaded file (PDF, DOCX, HTML, Markdown or text) to a Firecrawl
//! document, through the same readers a crawl uses: the file is the multipart `file`
//! part, the scrape options a JSON string in the `options` part.

use std::sync::Arc;

use axum::extract::{Multipart, State};
use serde_json::{Value, json};

use super::api::{self, ApiError, PageParts, ScrapeOptions};
use super::{Answer, App, Owner, page};

/// The kinds a file is read as, by its content type or name.
fn is_html(content_type: Option<&str>, name: &str, body: &[u8]) -> bool {
    let n = name.to_ascii_lowercase();
    n.ends_with(".html")
        || n.ends_with(".htm")
        || n.ends_with(".xhtml")
        || trawl_body::is_html(content_type, body)
}

/// The document of one uploaded file.
pub fn parse_file(
    name: &str,
    content_type: Option<&str>,
    body: &[u8],
    options: &ScrapeOptions,
) -> Result<Value, ApiError> {
    let opts = options.resolve()?;
    if opts.formats.needs_llm() || opts.script.is_some() || opts.formats.change_tracking.is_some() {
        return Err(ApiError::bad_request(
            "Bad Request: /v2/parse reads the file: no json, summary, changeTracking, \
             screenshot or browser options",
        ));
    }
    let url = format!("file:///{}", name.trim_start_matches('/'));
    let mut parts = PageParts {
        source_url: name.to_string(),
        url: url.clone(),
        status: 200,
        content_type: content_type.map(String::from),
        scrape_id: uuid::Uuid::new_v4().to_string(),
        ..Default::default()
    };
    if is_html(content_type, name, body) {
        let base = url::Url::parse(&url).map_err(ApiError::internal)?;
        let html = String::from_utf8_lossy(body);
        page::render_html(&html, &base, &opts, 0, &mut parts)?;
    } else if let Some(kind) = trawl_doc::kind_of(content_type, name, body) {
        page::render_document(body, kind, &mut parts);
        if let Some(e) = parts.extra.get("documentError").and_then(Value::as_str) {
            return Err(ApiError::bad_request(format!(
                "Bad Request: {name} could not be read: {e}"
            )));
        }
    } else {
        return Err(ApiError::new(
            axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Some("UNSUPPORTED_FILE_TYPE"),
            format!(
                "{name} ({}) is not a file trawl reads: PDF, DOCX, HTML, Markdown or text",
                content_type.unwrap_or("no content type")
            ),
        ));
    }
    Ok(api::document(parts, &opts.formats, None))
}

pub(crate) async fn parse(
    State(app): State<Arc<App>>,
    axum::Extension(Owner(owner)): axum::Extension<Owner>,
    mut form: Multipart,
) -> Answer {
    let bad = |m: String| ApiError::bad_request(format!("Bad Request: {m}"));
    app.usage.allow(&owner).await?;
    let mut file: Option<(String, Option<String>, Vec<u8>)> = None;
    let mut options = ScrapeOptions::default();
    while let Some(field) = form.next_field().await.map_err(|e| bad(e.to_string()))? {
        match field.name() {
            Some("file") => {
                let name = field.file_name().unwrap_or("upload").to_string();
                let ct = field.content_type().map(String::from);
                let bytes = field.bytes().await.map_err(|e| bad(e.to_string()))?;
                file = Some((name, ct, bytes.to_vec()));
            }
            Some("options") => {
                let text = field.text().await.map_err(|e| bad(e.to_string()))?;
                if !text.trim().is_empty() {
                    options = api::parse(text.as_bytes())?;
                }
            }
            _ => {}
        }
    }
    let (name, ct, bytes) =
        file.ok_or_else(|| bad("no file: send it as the multipart part \"file\"".into()))?;
    let doc =
        tokio::task::spawn_blocking(move || parse_file(&name, ct.as_deref(), &bytes, &options))
            .await
            .map_err(ApiError::internal)??;
    app.usage.spend(&owner, 1);
    Ok(axum::Json(json!({"success": true, "data": doc})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_and_text_files_become_markdown_and_others_are_refused() {
        let html = b"<html><head><title>T</title></head><body><main><h1>Hello</h1>\
                     <p>A paragraph long enough to be kept as the main content of the page.</p></main></body></html>";
        let d = parse_file(
            "page.html",
            Some("text/html"),
            html,
            &ScrapeOptions::default(),
        )
        .unwrap();
        assert!(d["markdown"].as_str().unwrap().contains("Hello"), "{d}");
        assert_eq!(d["metadata"]["title"], "T");
        let d = parse_file(
            "notes.md",
            Some("text/markdown"),
            b"# Notes\n\nbody",
            &ScrapeOptions::default(),
        )
        .unwrap();
        assert!(d["markdown"].as_str().unwrap().contains("# Notes"));
        let e = parse_file(
            "x.bin",
            Some("application/octet-stream"),
            &[0, 1, 2, 0xff],
            &ScrapeOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.status, axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
        // A file that claims to be a PDF and is not one is a clear error, not a panic.
        let e = parse_file(
            "bad.pdf",
            Some("application/pdf"),
            b"%PDF-1.7 broken",
            &ScrapeOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
    }
}
