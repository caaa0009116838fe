//! Quantities as people read them, for every view and the findings' text.

/// A duration in the unit that reads best.
pub fn secs(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s >= 1.0 {
        format!("{s:.2}s")
    } else if ns >= 1_000_000 {
        format!("{:.1}ms", ns as f64 / 1e6)
    } else {
        format!("{:.0}us", ns as f64 / 1e3)
    }
}

/// A duration as people write one: a number and its unit (`10s`, `500ms`, `250us`, `2m`,
/// `1.5s`; `ns`, `us` or `µs`, `ms`, `s`, `m`, `h`). A bare number is in `bare_unit`
/// (seconds for a recording's length, as before units were taken), or an error without one.
pub fn parse_duration(text: &str, bare_unit: Option<&str>) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = match (unit.trim(), bare_unit) {
        ("", Some(bare)) => bare,
        ("", None) => return Err(format!("{text:?} needs a unit: 10s, 500ms, 250us")),
        (unit, _) => unit,
    };
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: ns, us, ms, s, m, h"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (10s, 500ms, 250us)"))?;
    std::time::Duration::try_from_secs_f64(value * scale)
        .map_err(|_| format!("{text:?} is out of range"))
}

/// `parse_duration` for command-line options in which a bare number is seconds.
pub fn duration_or_secs(text: &str) -> Result<std::time::Duration, String> {
    parse_duration(text, Some("s"))
}

/// `parse_duration` for command-line options that need a unit.
pub fn duration(text: &str) -> Result<std::time::Duration, String> {
    parse_duration(text, None)
}

#[cfg(test)]
mod duration_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_are_read_with_their_units() {
        assert_eq!(duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("0s"), Ok(Duration::ZERO));
        assert_eq!(duration_or_secs("3"), Ok(Duration::from_secs(3)));
        assert!(duration("3").is_err(), "a unit is needed");
        assert!(duration("3 parsecs").is_err());
        assert!(duration("-1s").is_err());
        assert!(duration("1e999s").is_err());
        assert!(duration("").is_err());
    }
}
