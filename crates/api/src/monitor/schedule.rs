//! A monitor's schedule: a cron expression (five fields, or six with seconds first), or
//! words Firecrawl takes (`every 30 minutes`, `hourly`, `daily at 9:00`) turned into one.
//! Times are UTC: another `timezone` is refused rather than silently shifted.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds};

/// A schedule, checked: its cron expression and the parsed form.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub cron: String,
    parsed: Cron,
}

fn parse_cron(expr: &str) -> Result<Cron, String> {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .build()
        .parse(expr)
        .map_err(|e| format!("{expr:?} is not a cron expression: {e}"))
}

/// Words as a cron expression.
fn words(text: &str) -> Result<String, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.trim_start_matches("every ").trim();
    let fixed = match t {
        "minute" => Some("* * * * *".to_string()),
        "hour" | "hourly" => Some("0 * * * *".into()),
        "day" | "daily" => Some("0 0 * * *".into()),
        "week" | "weekly" => Some("0 0 * * 0".into()),
        "month" | "monthly" => Some("0 0 1 * *".into()),
        _ => None,
    };
    if let Some(f) = fixed {
        return Ok(f);
    }
    if let Some(at) = t
        .strip_prefix("daily at ")
        .or_else(|| t.strip_prefix("day at "))
    {
        let (h, m) = at.trim().split_once(':').unwrap_or((at.trim(), "0"));
        let (h, m): (u32, u32) = (
            h.trim().parse().map_err(|_| format!("{text:?}: no hour"))?,
            m.trim()
                .parse()
                .map_err(|_| format!("{text:?}: no minute"))?,
        );
        if h > 23 || m > 59 {
            return Err(format!("{text:?}: no such time of day"));
        }
        return Ok(format!("{m} {h} * * *"));
    }
    let mut parts = t.split_whitespace();
    let n: u32 = parts
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("{text:?} is not a schedule (like \"every 30 minutes\", \"hourly\", \"daily at 9:00\" or a cron expression)"))?;
    let unit = parts.next().unwrap_or_default().trim_end_matches('s');
    if n == 0 || parts.next().is_some() {
        return Err(format!("{text:?} is not a schedule"));
    }
    Ok(match unit {
        "second" | "sec" if n < 60 => format!("*/{n} * * * * *"),
        "minute" | "min" if n < 60 => format!("*/{n} * * * *"),
        "hour" if n < 24 => format!("0 */{n} * * *"),
        "day" if n < 32 => format!("0 0 */{n} * *"),
        _ => return Err(format!("{text:?} is not a schedule trawl takes")),
    })
}

impl Schedule {
    /// From the request's `{cron | text, timezone}`.
    pub fn parse(
        cron: Option<&str>,
        text: Option<&str>,
        timezone: Option<&str>,
    ) -> Result<Self, String> {
        if let Some(tz) =
            timezone.filter(|t| !matches!(t.trim(), "" | "UTC" | "Etc/UTC" | "utc" | "GMT"))
        {
            return Err(format!(
                "timezone {tz:?}: trawl schedules monitors in UTC; give the cron expression in UTC"
            ));
        }
        let cron = match (
            cron.filter(|c| !c.trim().is_empty()),
            text.filter(|t| !t.trim().is_empty()),
        ) {
            (Some(c), None) => c.trim().to_string(),
            (None, Some(t)) => words(t)?,
            (Some(_), Some(_)) => {
                return Err("give the schedule's cron or its text, not both".into());
            }
            (None, None) => return Err("the schedule needs a cron expression or a text".into()),
        };
        let parsed = parse_cron(&cron)?;
        Ok(Schedule { cron, parsed })
    }

    /// The first run after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.parsed.find_next_occurrence(&t, false).ok()
    }
}

impl FromStr for Schedule {
    type Err = String;
    fn from_str(cron: &str) -> Result<Self, String> {
        Schedule::parse(Some(cron), None, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn words_and_cron_give_the_next_run() {
        let t = Utc.with_ymd_and_hms(2026, 12, 6, 17, 7, 30).unwrap();
        let s = Schedule::parse(None, Some("every 30 minutes"), Some("UTC")).unwrap();
        assert_eq!(s.cron, "*/30 * * * *");
        assert_eq!(
            s.next_after(t).unwrap(),
            Utc.with_ymd_and_hms(2026, 12, 6, 17, 30, 0).unwrap()
        );
        let s = Schedule::parse(None, Some("daily at 9:15"), None).unwrap();
        assert_eq!(
            s.next_after(t).unwrap(),
            Utc.with_ymd_and_hms(2026, 12, 7, 9, 15, 0).unwrap()
        );
        let s = Schedule::parse(None, Some("hourly"), None).unwrap();
        assert_eq!(
            s.next_after(t).unwrap(),
            Utc.with_ymd_and_hms(2026, 12, 6, 18, 0, 0).unwrap()
        );
        let s: Schedule = "*/5 * * * * *".parse().unwrap();
        assert_eq!(
            s.next_after(t).unwrap(),
            Utc.with_ymd_and_hms(2026, 12, 6, 17, 7, 35).unwrap()
        );
        let s: Schedule = "0 9 * * 1".parse().unwrap();
        assert_eq!(
            s.next_after(t).unwrap(),
            Utc.with_ymd_and_hms(2026, 12, 7, 9, 0, 0).unwrap()
        );
    }

    #[test]
    fn bad_schedules_are_named() {
        for (cron, text, tz) in [
            (Some("not cron"), None, None),
            (None, Some("every fortnight"), None),
            (None, Some("daily at 25:00"), None),
            (Some("* * * * *"), Some("hourly"), None),
            (None, None, None),
            (Some("* * * * *"), None, Some("Europe/Paris")),
        ] {
            assert!(
                Schedule::parse(cron, text, tz).is_err(),
                "{cron:?} {text:?} {tz:?}"
            );
        }
    }
}
