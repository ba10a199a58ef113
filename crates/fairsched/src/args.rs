//! Parsers of command-line values (clap `value_parser`s) that several commands share:
//! durations, resource limits, signal names, points in time.

use fairsched_resources::PartialResources;
use serde_json::{Map, Value};

/// A duration in milliseconds: a plain number of milliseconds, or a number with a unit
/// (`ms`, `s`, `m`, `h`; `1.5s`).
pub(crate) fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(ms);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let scale = match unit {
        "ms" => 1.0,
        "s" => 1e3,
        "m" => 60e3,
        "h" => 3600e3,
        "d" => 86_400e3,
        _ => {
            return Err(format!(
                "{text:?}: expected milliseconds or a duration (500ms, 30s, 2m)"
            ));
        }
    };
    match n.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok((v * scale).round() as u64),
        _ => Err(format!(
            "{text:?}: expected milliseconds or a duration (500ms, 30s, 2m)"
        )),
    }
}

/// A size in bytes: a plain number, or one with a unit (`1GiB`, `500MB`, `64KiB`).
pub(crate) fn parse_bytes(text: &str) -> Result<u64, String> {
    fairsched_resources::parse_amount(fairsched_resources::ResourceKind::Memory, text)
        .ok()
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| format!("{text:?}: expected a size in bytes (1GiB, 500MB, 0)"))
}

/// Resource limits: `cpu=4,memory=8GiB` (a resource left out is unlimited), or `none`.
pub(crate) fn parse_limits(text: &str) -> Result<PartialResources, String> {
    if text.trim() == "none" {
        return Ok(PartialResources::default());
    }
    let mut map = Map::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected NAME=AMOUNT (cpu=4,memory=8GiB) or none"))?;
        map.insert(
            name.trim().to_string(),
            Value::String(value.trim().to_string()),
        );
    }
    serde_json::from_value(Value::Object(map)).map_err(|e| e.to_string())
}

/// A signal name (`SIGINT`, `INT`, `sigusr1`) as `SIGINT`.
pub(crate) fn parse_signal(text: &str) -> Result<String, String> {
    let upper = text.trim().to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    <nix::sys::signal::Signal as std::str::FromStr>::from_str(&name)
        .map(|_| name)
        .map_err(|_| format!("{text:?} is not a signal name (SIGINT, SIGTERM, SIGUSR1, ...)"))
}

/// `--since`: Unix milliseconds, or a duration ago.
pub(crate) fn parse_since(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(ms);
    }
    let unit = |u: &str| match u {
        "ms" => Some(1),
        "s" => Some(1_000),
        "m" => Some(60_000),
        "h" => Some(3_600_000),
        "d" => Some(86_400_000),
        _ => None,
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?}: expected Unix milliseconds or a duration like 10m"))?;
    let (n, u) = text.split_at(split);
    let ago = n
        .parse::<u64>()
        .ok()
        .zip(unit(u))
        .map(|(n, u)| n * u)
        .ok_or_else(|| {
            format!("{text:?}: expected Unix milliseconds or a duration (90s, 10m, 2h, 1d)")
        })?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    Ok(now.saturating_sub(ago))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn durations_and_signals() {
        assert_eq!(parse_duration_ms("2500"), Ok(2500));
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        assert_eq!(parse_duration_ms("1.5s"), Ok(1500));
        assert_eq!(parse_duration_ms("2m"), Ok(120_000));
        assert!(parse_duration_ms("10 parsecs").is_err());
        assert!(parse_duration_ms("s").is_err());
        assert_eq!(parse_signal("SIGINT"), Ok("SIGINT".to_string()));
        assert_eq!(parse_signal("usr1"), Ok("SIGUSR1".to_string()));
        assert!(parse_signal("SIGNOPE").is_err());
        let l = parse_limits("cpu=4, memory=8GiB").unwrap();
        assert_eq!(
            serde_json::to_value(l).unwrap(),
            serde_json::json!({"cpu": 4.0, "memory": 8u64 << 30})
        );
        assert_eq!(parse_limits("none"), Ok(PartialResources::default()));
        let err = parse_limits("cpuu=1").unwrap_err();
        assert!(err.contains("cpuu"), "{err}");
        assert!(parse_limits("cpu").is_err());
    }
}
