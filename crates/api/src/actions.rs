//! The browser's options checked before any page is fetched: each action's fields and a
//! screenshot's within bounds, so a request that cannot run is a 400 naming what is wrong.

use trawl_core::render::{Action, Shot};

use super::api::ApiError;

/// A screenshot's options within bounds: a quality of 1 to 100, a viewport of 1 to
/// 10,000 pixels a side.
pub(crate) fn check_shot(s: &Shot) -> Result<(), ApiError> {
    if s.quality.is_some_and(|q| !(1..=100).contains(&q)) {
        return Err(ApiError::bad_request(
            "Bad Request: a screenshot's quality is 1 to 100",
        ));
    }
    let side = |n: u32| (1..=10_000).contains(&n);
    if s.viewport
        .is_some_and(|v| !side(v.width) || !side(v.height))
    {
        return Err(ApiError::bad_request(
            "Bad Request: a viewport is 1 to 10000 pixels wide and high",
        ));
    }
    Ok(())
}

/// An action's fields within bounds (its selectors parse, a wait has one measure).
pub(crate) fn check_action(a: &Action) -> Result<(), String> {
    let selector = |s: &str| {
        trawl_extract::check_selectors(&[s.to_string()])
            .map(|_| ())
            .map_err(|e| format!("{s:?} is not a CSS selector: {e}"))
    };
    match a {
        Action::Wait {
            milliseconds,
            selector: sel,
        } => match (milliseconds, sel) {
            (Some(_), Some(_)) | (None, None) => {
                Err("give milliseconds or a selector, one of them".into())
            }
            (_, Some(s)) => selector(s),
            _ => Ok(()),
        },
        Action::Click { selector: s, .. } => selector(s),
        Action::Scroll {
            direction,
            selector: s,
        } => {
            if let Some(d) = direction
                .as_deref()
                .filter(|d| !matches!(*d, "up" | "down"))
            {
                return Err(format!("direction is up or down, not {d:?}"));
            }
            s.as_deref().map_or(Ok(()), selector)
        }
        Action::Press { key } if key.is_empty() => Err("needs a key".into()),
        Action::Screenshot { shot } => check_shot(shot).map_err(|e| e.message),
        Action::Pdf { scale, .. } if scale.is_some_and(|s| !(0.1..=2.0).contains(&s)) => {
            Err("scale is 0.1 to 2".into())
        }
        _ => Ok(()),
    }
}
