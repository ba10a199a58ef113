//! Parsers of command-line values (clap `value_parser`s) that several commands share:
//! durations, resource limits, signal names, points in time.

use fairsched_resources::PartialResources;
use serde_json::{Map, Value};

/// A duration in milliseconds: a plain number of milliseconds, or numbers with units (`ms`,
/// `s`, `m`, `h`, `d`; `1.5s`, `1m30s`, `1h30m`), largest unit first.
pub(crate) fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(ms);
    }
    let bad = || format!("{text:?}: expected milliseconds or a duration (500ms, 30s, 2m, 1h30m)");
    let mut rest = text;
    let mut total = 0.0;
    let mut last_scale = f64::INFINITY;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (n, after) = rest.split_at(split);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let scale = match unit {
            "ms" => 1.0,
            "s" => 1e3,
            "m" => 60e3,
            "h" => 3600e3,
            "d" => 86_400e3,
            _ => return Err(bad()),
        };
        // Each unit once, largest first (`30s1m` is a slip, not 90 s).
        if scale >= last_scale {
            return Err(bad());
        }
        last_scale = scale;
        match n.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => total += v * scale,
            _ => return Err(bad()),
        }
        rest = next;
    }
    if total > u64::MAX as f64 {
        return Err(format!(
            "{text:?}: too long a duration (at most {} ms)",
            u64::MAX
        ));
    }
    Ok(total.round() as u64)
}

/// A weight: a positive, finite number (`2`, `0.5`). `NaN` and `inf` would reach the server
/// as JSON `null`, which means "unchanged": refused here.
pub(crate) fn parse_weight(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(w) if w.is_finite() && w > 0.0 => Ok(w),
        _ => Err(format!("{text:?}: a weight is a positive number (2, 0.5)")),
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
        assert_eq!(parse_duration_ms("1m30s"), Ok(90_000));
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("2d"), Ok(172_800_000));
        // Well formed but too long: said so, not that the form is wrong.
        let err = parse_duration_ms("999999999999d").unwrap_err();
        assert!(err.contains("too long a duration"), "{err}");
        assert!(parse_duration_ms("30s1m").is_err());
        assert!(parse_duration_ms("1m1m").is_err());
        assert!(parse_duration_ms("1e400s").is_err());
        assert!(parse_duration_ms("30s ").is_ok());
        assert_eq!(parse_weight("2"), Ok(2.0));
        for bad in ["NaN", "inf", "-inf", "0", "-1", "x", ""] {
            let err = parse_weight(bad).unwrap_err();
            assert!(err.contains("positive number"), "{bad}: {err}");
        }
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
