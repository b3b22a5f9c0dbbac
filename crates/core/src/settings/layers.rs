//! The layers of [`Settings`]: defaults, a JSON file, `TRAWL_*` variables.
//!
//! Environment values are strings; each is read as the type of its field's default (a
//! number, a boolean, a comma-separated list, else a string), so `TRAWL_CRAWL=42` stays
//! the string "42" and `TRAWL_DELAY_MS=abc` is an error that names the variable.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::Settings;

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("settings file {path}: {message}")]
    File { path: String, message: String },
    #[error("{var}={value:?}: {message}")]
    Env {
        var: String,
        value: String,
        message: String,
    },
    #[error("settings: {0}")]
    Invalid(String),
}

/// Each field's name and the section it belongs to.
pub fn flat_keys() -> BTreeMap<String, String> {
    let mut keys = BTreeMap::new();
    for (section, fields) in sections(&defaults()) {
        for field in fields.keys() {
            keys.insert(field.clone(), section.clone());
        }
    }
    keys
}

fn defaults() -> Value {
    // Settings is plain data (strings, numbers, lists): serializing it cannot fail.
    serde_json::to_value(Settings::default()).unwrap_or(Value::Null)
}

fn sections(v: &Value) -> Vec<(String, Map<String, Value>)> {
    v.as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| v.as_object().map(|m| (k.clone(), m.clone())))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn load(
    file: Option<&Path>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Settings, SettingsError> {
    let defaults = defaults();
    let keys = flat_keys();
    let mut merged = defaults.clone();
    let file = file
        .map(|p| p.to_string_lossy().to_string())
        .or_else(|| env("TRAWL_CONFIG").filter(|p| !p.is_empty()));
    if let Some(path) = file {
        let err = |message: String| SettingsError::File {
            path: path.clone(),
            message,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| err(e.to_string()))?;
        let value: Value = serde_json::from_str(&text).map_err(|e| err(e.to_string()))?;
        merge_file(&mut merged, &keys, value).map_err(err)?;
    }
    for (key, section) in &keys {
        let var = format!("TRAWL_{}", key.to_ascii_uppercase());
        let Some(raw) = env(&var).filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        let like = &defaults[section][key];
        let value = coerce(like, &raw).map_err(|message| SettingsError::Env {
            var: var.clone(),
            value: raw.clone(),
            message,
        })?;
        merged[section][key] = value;
    }
    let settings: Settings =
        serde_json::from_value(merged).map_err(|e| SettingsError::Invalid(e.to_string()))?;
    settings.validate()?;
    Ok(settings)
}

/// Former names of fields, still read from files (`out_dir` was the services' `out`).
const ALIASES: [(&str, &str); 1] = [("out_dir", "out")];

/// A file gives a field flat (`"delay_ms": 0`) or in its section (`"crawl": {..}`); a key
/// that is both a section and a field (`crawl`) is the section when its value is an object.
fn merge_file(
    merged: &mut Value,
    keys: &BTreeMap<String, String>,
    file: Value,
) -> Result<(), String> {
    let Value::Object(top) = file else {
        return Err("expected a JSON object".into());
    };
    for (k, v) in top {
        let k = ALIASES
            .iter()
            .find(|(old, _)| *old == k)
            .map_or(k, |(_, new)| new.to_string());
        let is_section = merged.get(&k).is_some_and(Value::is_object);
        if is_section && v.is_object() {
            for (field, fv) in v.as_object().into_iter().flatten() {
                if merged[&k].get(field).is_none() {
                    return Err(format!("unknown setting {k}.{field}"));
                }
                merged[&k][field] = fv.clone();
            }
        } else if let Some(section) = keys.get(&k) {
            merged[section][&k] = v;
        } else {
            return Err(format!("unknown setting {k:?}"));
        }
    }
    Ok(())
}

/// An environment string as a value of the same kind as `like` (the field's default).
/// Strings are taken as they are (a password may have spaces); the rest is trimmed.
fn coerce(like: &Value, raw: &str) -> Result<Value, String> {
    if matches!(like, Value::String(_) | Value::Null) {
        return Ok(Value::String(raw.to_string()));
    }
    let raw = raw.trim();
    match like {
        Value::Bool(_) => match raw.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(Value::Bool(true)),
            "0" | "false" | "no" | "off" => Ok(Value::Bool(false)),
            _ => Err("not true or false".into()),
        },
        // Every unsigned setting has a default of 0 or more; the signed ones are listed.
        Value::Number(n) if n.is_u64() => raw
            .parse::<u64>()
            .map(Value::from)
            .map_err(|_| "not a whole number of 0 or more".into()),
        Value::Number(n) if n.is_i64() => raw
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| "not a whole number".into()),
        Value::Number(_) => raw
            .parse::<f64>()
            .map(Value::from)
            .map_err(|_| "not a number".into()),
        Value::Array(_) => Ok(Value::Array(
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_string()))
                .collect(),
        )),
        _ => Ok(Value::String(raw.to_string())),
    }
}

pub(super) fn flat(s: &Settings) -> BTreeMap<String, Vec<String>> {
    let v = serde_json::to_value(s).unwrap_or(Value::Null);
    let mut out = BTreeMap::new();
    for (_, fields) in sections(&v) {
        for (k, v) in fields {
            out.insert(k, strings(&v));
        }
    }
    out
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Null => Vec::new(),
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().flat_map(strings).collect(),
        other => vec![other.to_string()],
    }
}
