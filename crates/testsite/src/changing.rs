//! Pages a test changes between two crawls (`/changing/{name}`), answered the way a
//! careful server does: a strong `ETag` (a hash of the body) and a `Last-Modified` from a
//! logical clock (one second per change, so HTTP dates, which count whole seconds, tell
//! every version apart), and 304 to `If-None-Match` / `If-Modified-Since`. A page set
//! without validators gets neither header and is always answered in full.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, UNIX_EPOCH};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::Shared;

#[derive(Debug, Clone)]
pub(crate) struct ChangingPage {
    body: String,
    validators: bool,
    /// Seconds after 2026-01-01 of the last change.
    modified: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Pages {
    pages: HashMap<String, ChangingPage>,
    clock: u64,
}

impl Pages {
    pub(crate) fn set(&mut self, name: &str, body: Option<String>, validators: bool) {
        self.clock += 1;
        match body {
            None => {
                self.pages.remove(name);
            }
            Some(body) => {
                let modified = match self.pages.get(name) {
                    Some(p) if p.body == body => p.modified,
                    _ => self.clock,
                };
                self.pages.insert(
                    name.to_string(),
                    ChangingPage {
                        body,
                        validators,
                        modified,
                    },
                );
            }
        }
    }
}

fn etag(body: &str) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    format!("\"{:016x}\"", h.finish())
}

fn last_modified(secs: u64) -> String {
    // 2026-01-01T00:00:00Z.
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_767_225_600 + secs))
}

pub(crate) async fn changing(
    State(s): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let page = s
        .changing
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .pages
        .get(&name)
        .cloned();
    let Some(p) = page else {
        return (StatusCode::NOT_FOUND, "no such page").into_response();
    };
    let html = [(header::CONTENT_TYPE, "text/html; charset=utf-8")];
    if !p.validators {
        return (html, p.body).into_response();
    }
    let tag = etag(&p.body);
    let lm = last_modified(p.modified);
    let header_str = |n: header::HeaderName| headers.get(n).and_then(|v| v.to_str().ok());
    let not_modified = match header_str(header::IF_NONE_MATCH) {
        Some(inm) => inm.split(',').any(|t| t.trim() == tag || t.trim() == "*"),
        None => header_str(header::IF_MODIFIED_SINCE)
            .and_then(|d| httpdate::parse_http_date(d).ok())
            .is_some_and(|since| {
                UNIX_EPOCH + Duration::from_secs(1_767_225_600 + p.modified) <= since
            }),
    };
    let validators = [(header::ETAG, tag), (header::LAST_MODIFIED, lm)];
    if not_modified {
        return (StatusCode::NOT_MODIFIED, validators).into_response();
    }
    (html, validators, p.body).into_response()
}
