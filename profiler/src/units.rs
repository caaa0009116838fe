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

/// A moment of a recording, as `--from` and `--to` take it: a time after the recording's
/// start (`30s`, `1m`, a bare number of seconds) or a time of the wall clock, which is what
/// an alert or a log line gives (`2026-12-02T18:41:05Z`, `2026-12-02 18:41:05`, `18:41:05`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Moment {
    /// This long after the recording's start.
    AfterStart(std::time::Duration),
    /// An instant: RFC 3339 with its offset, or a date and time on this machine's time zone.
    At(jiff::Timestamp),
    /// A time of day on this machine's time zone: the one nearest the recording's start.
    TimeOfDay(jiff::civil::Time),
}

impl Moment {
    /// How long after the recording's start (`start_unix_ns`, wall clock) this moment is, in
    /// ns: 0 for a moment before it. `Err` says when the moment cannot be placed.
    pub fn after_start_ns(&self, start_unix_ns: u64) -> Result<u64, String> {
        let start = i128::from(start_unix_ns);
        let at = match *self {
            Self::AfterStart(d) => return Ok(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
            Self::At(t) => t.as_nanosecond(),
            Self::TimeOfDay(time) => {
                let zone = jiff::tz::TimeZone::system();
                let begun = jiff::Timestamp::from_nanosecond(start)
                    .map_err(|e| format!("the recording's start cannot be placed: {e}"))?
                    .to_zoned_datetime(zone.clone());
                // The same time of day the day before, of, and after the start: the nearest.
                [-1i64, 0, 1]
                    .into_iter()
                    .filter_map(|days| {
                        let date = begun
                            .date()
                            .checked_add(jiff::Span::new().days(days))
                            .ok()?;
                        let at = date
                            .to_datetime(time)
                            .to_zoned_datetime(zone.clone())
                            .ok()?;
                        Some(at.timestamp().as_nanosecond())
                    })
                    .min_by_key(|at| (at - start).abs())
                    .ok_or_else(|| format!("{time} cannot be placed near the recording"))?
            }
        };
        Ok(u64::try_from((at - start).max(0)).unwrap_or(u64::MAX))
    }
}

impl std::fmt::Display for Moment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::AfterStart(d) => write!(f, "{} after the start", secs(d.as_nanos() as u64)),
            Self::At(t) => write!(f, "{t}"),
            Self::TimeOfDay(t) => write!(f, "{t}"),
        }
    }
}

/// `--from` and `--to`: a duration (a bare number is seconds), an RFC 3339 instant, a date and
/// time, or a time of day (the last two on this machine's time zone).
pub fn moment(text: &str) -> Result<Moment, String> {
    let text = text.trim();
    if let Ok(d) = duration_or_secs(text) {
        return Ok(Moment::AfterStart(d));
    }
    if let Ok(t) = text.parse::<jiff::Timestamp>() {
        return Ok(Moment::At(t));
    }
    if let Ok(dt) = text.parse::<jiff::civil::DateTime>() {
        let at = dt
            .to_zoned_datetime(jiff::tz::TimeZone::system())
            .map_err(|e| format!("{text:?} is not a time on this machine's clock: {e}"))?;
        return Ok(Moment::At(at.timestamp()));
    }
    if let Ok(t) = text.parse::<jiff::civil::Time>() {
        return Ok(Moment::TimeOfDay(t));
    }
    Err(format!(
        "{text:?} is neither a time after the start (30s, 1m) nor a time of day \
         (18:41:05, 2026-12-02 18:41:05, 2026-12-02T18:41:05Z)"
    ))
}

#[cfg(test)]
mod moment_tests {
    use super::*;
    use std::time::Duration;

    /// 2026-12-02T18:41:05Z.
    const START: u64 = 1_796_236_865_000_000_000;

    #[test]
    fn moments_are_offsets_or_wall_clock_times() {
        assert_eq!(
            moment("30s"),
            Ok(Moment::AfterStart(Duration::from_secs(30)))
        );
        assert_eq!(moment("2"), Ok(Moment::AfterStart(Duration::from_secs(2))));
        let at = |t: &str| moment(t).unwrap().after_start_ns(START).unwrap();
        assert_eq!(at("2026-12-02T18:41:15Z"), 10_000_000_000);
        assert_eq!(at("2026-12-02T19:41:15.5+01:00"), 10_500_000_000);
        // Before the start: the start.
        assert_eq!(at("2026-12-02T18:00:00Z"), 0);
        assert!(moment("yesterday").is_err());
        assert!(moment("25:00:00").is_err());
    }

    #[test]
    fn a_time_of_day_is_the_nearest_to_the_start() {
        // In the machine's own zone, whatever it is: a time of day read as that zone's.
        let zone = jiff::tz::TimeZone::system();
        let start = jiff::Timestamp::from_nanosecond(i128::from(START))
            .unwrap()
            .to_zoned_datetime(zone);
        let later = start.checked_add(jiff::Span::new().seconds(90)).unwrap();
        let text = later.time().to_string();
        assert_eq!(
            moment(&text).unwrap().after_start_ns(START),
            Ok(90_000_000_000)
        );
        // A local date and time names the same instant.
        let text = later.datetime().to_string();
        assert_eq!(
            moment(&text).unwrap().after_start_ns(START),
            Ok(90_000_000_000)
        );
    }
}

/// A size as people write one: a number and its unit (`256MiB`, `1.5GiB`, `512KiB`; `B`,
/// `KiB`, `MiB`, `GiB`, `TiB`, and `K`, `M`, `G`, `T` for the same); a bare number is MiB.
pub fn size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let shift = match unit.trim() {
        "B" => 0,
        "K" | "KiB" | "k" => 10,
        "" | "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        "T" | "TiB" => 40,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: B, KiB, MiB, GiB, TiB"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size (256MiB, 1GiB)"))?;
    let bytes =
        value * f64::from(1u32 << shift.min(30)) * f64::from(1u32 << (shift - shift.min(30)));
    if !(bytes.is_finite() && bytes < u64::MAX as f64) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod size_tests {
    use super::size;

    #[test]
    fn sizes_are_read_with_their_units() {
        assert_eq!(size("256MiB"), Ok(256 << 20));
        assert_eq!(size("256"), Ok(256 << 20));
        assert_eq!(size("1.5GiB"), Ok(3 << 29));
        assert_eq!(size("512K"), Ok(512 << 10));
        assert_eq!(size("2T"), Ok(2 << 40));
        assert_eq!(size("100B"), Ok(100));
        assert!(size("1 parsec").is_err());
        assert!(size("-1MiB").is_err());
        assert!(size("1e999MiB").is_err());
        assert!(size("").is_err());
    }
}
