//! The `--time` argument of `zkrs-server restore`: milliseconds since the Unix epoch, or an
//! RFC 3339 date and time (`2026-11-30T07:12:03Z`, `2026-11-30T08:12:03.250+01:00`).

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian), for any year.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn num(s: &str, what: &str, lo: i64, hi: i64) -> Result<i64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what} `{s}` is not a number"));
    }
    let v: i64 = s.parse().map_err(|_| format!("{what} `{s}` is out of range"))?;
    if !(lo..=hi).contains(&v) {
        return Err(format!("{what} {v} is not within {lo}..={hi}"));
    }
    Ok(v)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Parses `--time`: all digits is epoch milliseconds; otherwise RFC 3339 (`T` or a space
/// between date and time, fractional seconds to the millisecond kept, `Z` or an offset).
///
/// Errors: a message saying which part does not parse.
pub fn parse_time_ms(s: &str) -> Result<i64, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map_err(|_| format!("`{s}`: epoch milliseconds out of range"));
    }
    let err = |why: String| {
        format!("`{s}`: {why} (want epoch milliseconds or RFC 3339, e.g. 2026-11-30T07:12:03Z)")
    };
    let (date, rest) = s.split_at(s.find(['T', 't', ' ']).ok_or_else(|| err("no time part".into()))?);
    let rest = &rest[1..];
    let mut d = date.split('-');
    let (Some(y), Some(mo), Some(da), None) = (d.next(), d.next(), d.next(), d.next()) else {
        return Err(err("the date is not YYYY-MM-DD".into()));
    };
    let y = num(y, "year", 0, 9999).map_err(err)?;
    let mo = num(mo, "month", 1, 12).map_err(err)?;
    let da = num(da, "day", 1, days_in_month(y, mo)).map_err(err)?;
    let (clock, offset_min) = if let Some(c) = rest.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else {
        let at = rest.rfind(['+', '-']).ok_or_else(|| err("no `Z` or UTC offset".into()))?;
        let (c, off) = rest.split_at(at);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let (oh, om) = off[1..].split_once(':').ok_or_else(|| err("the offset is not +HH:MM".into()))?;
        (
            c,
            sign * (num(oh, "offset hours", 0, 23).map_err(err)? * 60
                + num(om, "offset minutes", 0, 59).map_err(err)?),
        )
    };
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let mut t = hms.split(':');
    let (Some(h), Some(mi), Some(se), None) = (t.next(), t.next(), t.next(), t.next()) else {
        return Err(err("the time is not HH:MM:SS".into()));
    };
    let h = num(h, "hour", 0, 23).map_err(err)?;
    let mi = num(mi, "minute", 0, 59).map_err(err)?;
    // 60: a leap second, counted as the next second's start.
    let se = num(se, "second", 0, 60).map_err(err)?;
    let ms = if frac.is_empty() {
        0
    } else {
        let digits: String = frac.chars().take(3).collect();
        num(frac, "fraction", 0, i64::MAX).map_err(err)?;
        num(&format!("{digits:0<3}"), "fraction", 0, 999).map_err(err)?
    };
    let secs = days_from_civil(y, mo, da) * 86_400 + h * 3600 + mi * 60 + se - offset_min * 60;
    Ok(secs * 1000 + ms)
}

/// Formats epoch milliseconds as RFC 3339 in UTC, for messages.
pub fn format_time_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil from days (the inverse of days_from_civil).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        ms.rem_euclid(1000)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms() {
        assert_eq!(parse_time_ms("1700000000123"), Ok(1_700_000_000_123));
        assert_eq!(parse_time_ms("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_time_ms("2023-11-14T22:13:20.123Z"), Ok(1_700_000_000_123));
        assert_eq!(parse_time_ms("2023-11-14T23:13:20.1234+01:00"), Ok(1_700_000_000_123));
        assert_eq!(parse_time_ms("2023-11-14 17:13:20-05:00"), Ok(1_700_000_000_000));
        assert_eq!(parse_time_ms("2024-02-29T00:00:00Z"), Ok(1_709_164_800_000));
        for bad in ["", "2023-02-29T00:00:00Z", "2023-11-14T25:00:00Z", "2023-11-14T22:13:20", "yesterday"] {
            assert!(parse_time_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_what_it_parses() {
        for ms in [0, 1_700_000_000_123, 1_709_164_800_000, 4_102_444_799_999] {
            assert_eq!(parse_time_ms(&format_time_ms(ms)), Ok(ms), "{}", format_time_ms(ms));
        }
        assert_eq!(format_time_ms(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }
}
