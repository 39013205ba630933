//! The one duration grammar of kernel knobs and accept policies (wire and interposer): a number
//! and its unit, `500ns`, `2us` (or `2µs`), `1.5ms`, `3s`. A bare number is refused (it meant
//! nanoseconds in one place and milliseconds in another), except `0`, which needs no unit. Keys
//! that carry their unit in their name (`drain_ms`, `deadline_ms`) and the `stalls=` list's
//! positional `START_US:DUR_US` fields keep their numbers, so recorded seeds still replay.

use std::time::Duration;

/// The units a duration takes, largest first, with their length in nanoseconds.
const UNITS: [(&str, u128); 4] = [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000), ("ns", 1)];

/// Parses `s` as a duration of at most `max`; the error says what was wrong and shows the form.
pub fn parse(s: &str, max: Duration) -> Result<Duration, String> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let x: f64 = num.parse().map_err(|_| format!("`{s}` is not a duration (e.g. 500us, 20ms, 1s)"))?;
    let scale = match unit {
        "" if x == 0.0 => 1.0,
        "" => return Err(format!("`{s}` has no unit: write {s}ms, {s}us, {s}ns or {s}s")),
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (ns, us, ms or s)")),
    };
    let ns = x * scale;
    if !(0.0..=max.as_nanos() as f64).contains(&ns) {
        return Err(format!("`{s}` is longer than the {} limit", show(max)));
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}

/// `d` in the largest unit that shows it exactly (`1500us`, `3ms`, `0s`): [`parse`] reads it back.
pub fn show(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    let (unit, scale) = UNITS.iter().find(|(_, scale)| ns.is_multiple_of(*scale)).copied().unwrap_or(("ns", 1));
    format!("{}{unit}", ns / scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn reads_every_unit() {
        assert_eq!(parse("500ns", HOUR), Ok(Duration::from_nanos(500)));
        assert_eq!(parse("2us", HOUR), Ok(Duration::from_micros(2)));
        assert_eq!(parse("2µs", HOUR), Ok(Duration::from_micros(2)));
        assert_eq!(parse("1.5ms", HOUR), Ok(Duration::from_micros(1500)));
        assert_eq!(parse("3s", HOUR), Ok(Duration::from_secs(3)));
        assert_eq!(parse("0", HOUR), Ok(Duration::ZERO));
    }

    #[test]
    fn refuses_a_bare_number_and_says_how_to_write_it() {
        let e = parse("20", HOUR).unwrap_err();
        assert!(e.contains("no unit") && e.contains("20ms"), "{e}");
        assert!(parse("1h", HOUR).unwrap_err().contains("unknown unit `h`"));
        assert!(parse("-1ms", HOUR).is_err());
        assert!(parse("", HOUR).is_err());
        assert!(parse("7200s", HOUR).unwrap_err().contains("3600s"));
        assert!(parse("99999999999999999999s", HOUR).is_err());
    }

    #[test]
    fn shows_what_it_reads() {
        for d in [0, 1, 999, 1_000, 1_500_000, 3_000_000, 2_000_000_000, 3_600_000_000_000] {
            let d = Duration::from_nanos(d);
            assert_eq!(parse(&show(d), HOUR), Ok(d), "{}", show(d));
        }
        assert_eq!(show(Duration::from_micros(1500)), "1500us");
        assert_eq!(show(Duration::from_millis(3)), "3ms");
    }
}
