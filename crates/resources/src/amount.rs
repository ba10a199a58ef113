//! Human-readable resource amounts: `"4GiB"`, `"500MiB"`, `"1.5"`, `"2k"`.

use crate::{ResourceKind, Resources};

/// Why an amount could not be parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AmountError {
    #[error("empty value")]
    Empty,
    #[error("{0:?} is not a number (expected e.g. \"4GiB\", \"1.5\", \"200\")")]
    NotANumber(String),
    #[error(
        "unknown unit {unit:?} in {input:?} (memory units: B, KiB, MiB, GiB, TiB, PiB, K, M, G, T, P)"
    )]
    UnknownUnit { input: String, unit: String },
    #[error("{0} is negative; amounts must be >= 0")]
    Negative(String),
    #[error("{0} is not finite")]
    NotFinite(String),
    #[error("{0} is too large")]
    TooLarge(String),
    #[error("{value} has more than two decimals; cpu is fixed point with 0.01 precision")]
    TooPrecise { value: String },
}

const BINARY_UNITS: &[(&str, f64)] = &[
    ("KiB", 1024.0),
    ("MiB", 1048576.0),
    ("GiB", 1073741824.0),
    ("TiB", 1099511627776.0),
    ("PiB", 1125899906842624.0),
    ("Ki", 1024.0),
    ("Mi", 1048576.0),
    ("Gi", 1073741824.0),
    ("Ti", 1099511627776.0),
    ("Pi", 1125899906842624.0),
];

const DECIMAL_UNITS: &[(&str, f64)] = &[
    ("KB", 1e3),
    ("MB", 1e6),
    ("GB", 1e9),
    ("TB", 1e12),
    ("PB", 1e15),
    ("k", 1e3),
    ("K", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
    ("P", 1e15),
    ("B", 1.0),
];

/// Parses a human-readable amount of `kind` into raw units (cpu in hundredths).
///
/// Accepted: plain numbers (`"1.5"`, `"200"`), and unit suffixes. Binary suffixes
/// (`KiB`/`Ki`, `MiB`/`Mi`, ...) are powers of 1024; decimal ones (`KB`/`K`/`k`, `MB`/`M`, ...)
/// are powers of 1000; `B` is bytes. Units are accepted for every kind (`"2k"` user slots),
/// though they mostly make sense for memory and network. cpu accepts at most two decimals.
pub fn parse_amount(kind: ResourceKind, input: &str) -> Result<i64, AmountError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(AmountError::Empty);
    }
    let split = s
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')
        })
        .unwrap_or(s.len());
    // "1e3" is a number; "1E" alone is not, and "1EiB" is not supported.
    let (num, unit) = s.split_at(split);
    let unit = unit.trim();
    let number: f64 = num
        .parse()
        .map_err(|_| AmountError::NotANumber(input.to_string()))?;
    let multiplier = if unit.is_empty() {
        1.0
    } else {
        BINARY_UNITS
            .iter()
            .chain(DECIMAL_UNITS)
            .find(|(u, _)| *u == unit)
            .map(|&(_, m)| m)
            .ok_or_else(|| AmountError::UnknownUnit {
                input: input.to_string(),
                unit: unit.to_string(),
            })?
    };
    value_to_raw(kind, number * multiplier, input)
}

/// Converts a natural-unit double into raw units, rejecting negative, non-finite and
/// out-of-range values (used for numbers given directly in JSON/TOML, too).
pub(crate) fn value_to_raw(
    kind: ResourceKind,
    value: f64,
    shown: &str,
) -> Result<i64, AmountError> {
    if !value.is_finite() {
        return Err(AmountError::NotFinite(shown.to_string()));
    }
    if value < 0.0 {
        return Err(AmountError::Negative(shown.to_string()));
    }
    if value > Resources::infinite().get(kind) {
        return Err(AmountError::TooLarge(shown.to_string()));
    }
    if kind == ResourceKind::Cpu {
        let hundredths = value * 100.0;
        // A positive amount below a hundredth would silently become 0.
        if (hundredths - hundredths.round()).abs() > 1e-6 * hundredths.abs().max(1.0)
            || (value > 0.0 && hundredths.round() == 0.0)
        {
            return Err(AmountError::TooPrecise {
                value: shown.to_string(),
            });
        }
    }
    Ok(Resources::convert(kind, value))
}

/// A number as a person would write it in an error: `1.5`, `200`, or `1e308` and `1e-300`
/// rather than their hundreds of digits.
pub(crate) fn shown_number(value: f64) -> String {
    let plain = value.to_string();
    if plain.len() <= 20 {
        plain
    } else {
        format!("{value:e}")
    }
}

/// Formats raw units of `kind` for humans: cpu as a decimal (`"2.5"`), memory in the largest
/// binary unit it reaches, with at most two decimals (`"4GiB"`, `"1.5GiB"`, `"512MiB"`,
/// `"100B"`); a size that two decimals do not give exactly is marked approximate
/// (`"~23.54GiB"`). The rest as integers.
pub fn format_amount(kind: ResourceKind, raw: i64) -> String {
    match kind {
        ResourceKind::Cpu => {
            let sign = if raw < 0 { "-" } else { "" };
            let abs = raw.unsigned_abs();
            let (whole, frac) = (abs / 100, abs % 100);
            if frac == 0 {
                format!("{sign}{whole}")
            } else if frac % 10 == 0 {
                format!("{sign}{whole}.{}", frac / 10)
            } else {
                format!("{sign}{whole}.{frac:02}")
            }
        }
        ResourceKind::Memory => {
            const UNITS: [(&str, u64); 5] = [
                ("PiB", 1 << 50),
                ("TiB", 1 << 40),
                ("GiB", 1 << 30),
                ("MiB", 1 << 20),
                ("KiB", 1 << 10),
            ];
            let sign = if raw < 0 { "-" } else { "" };
            let abs = raw.unsigned_abs();
            let Some((name, size)) = UNITS.into_iter().find(|&(_, size)| abs >= size) else {
                return format!("{raw}B");
            };
            // Hundredths of the unit, rounded; exact when they give the size back.
            let hundredths = ((abs as u128 * 100 + size as u128 / 2) / size as u128) as u64;
            let exact = hundredths as u128 * size as u128 == abs as u128 * 100;
            let (whole, frac) = (hundredths / 100, hundredths % 100);
            let number = if frac == 0 {
                whole.to_string()
            } else if frac % 10 == 0 {
                format!("{whole}.{}", frac / 10)
            } else {
                format!("{whole}.{frac:02}")
            };
            let approx = if exact { "" } else { "~" };
            format!("{approx}{sign}{number}{name}")
        }
        _ => raw.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ResourceKind::*;

    #[test]
    fn parses_human_amounts() {
        let cases: &[(ResourceKind, &str, i64)] = &[
            (Memory, "4GiB", 4 << 30),
            (Memory, "500MiB", 500 << 20),
            (Memory, "1.5Gi", 3 << 29),
            (Memory, "2KB", 2000),
            (Memory, "2K", 2000),
            (Memory, "123", 123),
            (Memory, "123B", 123),
            (Memory, " 1 MiB ", 1 << 20),
            (Cpu, "1.5", 150),
            (Cpu, "2.25", 225),
            (Cpu, "0", 0),
            (Cpu, "1e1", 1000),
            (UserSlots, "2k", 2000),
            (Gpu, "8", 8),
        ];
        for &(kind, input, raw) in cases {
            assert_eq!(parse_amount(kind, input), Ok(raw), "{kind} {input:?}");
        }
    }

    #[test]
    fn rejects_bad_amounts_with_reasons() {
        let cases: &[(ResourceKind, &str, &str)] = &[
            (Memory, "", "empty"),
            (Memory, "abc", "not a number"),
            (Memory, "4XB", "unknown unit"),
            (Memory, "-1GiB", "negative"),
            (Cpu, "1.005", "two decimals"),
            (Memory, "100000PiB", "too large"),
            (Memory, "1e308", "1e308 is too large"),
            // Not 0 cpu in disguise.
            (Cpu, "1e-300", "1e-300 has more than two decimals"),
            (Cpu, "0.004", "two decimals"),
        ];
        for &(kind, input, needle) in cases {
            let err = parse_amount(kind, input).unwrap_err().to_string();
            assert!(err.contains(needle), "{input:?}: {err}");
        }
    }

    #[test]
    fn formats_amounts() {
        assert_eq!(format_amount(Cpu, 150), "1.5");
        assert_eq!(format_amount(Cpu, 105), "1.05");
        assert_eq!(format_amount(Cpu, 300), "3");
        assert_eq!(format_amount(Memory, 4 << 30), "4GiB");
        assert_eq!(format_amount(Memory, 1536 << 20), "1.5GiB");
        assert_eq!(format_amount(Memory, 512 << 20), "512MiB");
        assert_eq!(format_amount(Memory, (1 << 30) + (1 << 28)), "1.25GiB");
        // A detected 24684084 KiB: readable, and said to be rounded.
        assert_eq!(format_amount(Memory, 24684084 << 10), "~23.54GiB");
        assert_eq!(format_amount(Memory, (1 << 30) + 1), "~1GiB");
        assert_eq!(format_amount(Memory, -(2 << 20)), "-2MiB");
        assert_eq!(format_amount(Memory, 100), "100B");
        assert_eq!(format_amount(Memory, 0), "0B");
        assert_eq!(format_amount(UserSlots, 7), "7");
    }

    proptest::proptest! {
        #[test]
        fn format_then_parse_round_trips(kind_index in 0usize..5, raw in 0i64..(1 << 40)) {
            let kind = ResourceKind::ALL[kind_index];
            let raw = raw.min(Resources::infinite().raw_of(kind));
            let text = format_amount(kind, raw);
            // Exact unless marked approximate; then within half a hundredth of its unit.
            match text.strip_prefix('~') {
                None => proptest::prop_assert_eq!(parse_amount(kind, &text), Ok(raw), "{}", text),
                Some(rounded) => {
                    let back = parse_amount(kind, rounded).expect("parses");
                    let error = (back - raw).abs() as f64 / raw as f64;
                    proptest::prop_assert!(error <= 0.005, "{} for {}", text, raw);
                }
            }
        }
    }
}
