//! HTTP dates (RFC 9110 IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`) without
//! allocation: formatting into a fixed array and parsing back, over Unix seconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate.
pub const HTTP_DATE_LEN: usize = 29;

const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// Days since 1970-01-01 to (year, month 1-12, day 1-31): Howard Hinnant's
/// `civil_from_days`.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month 1-12, day 1-31) to days since 1970-01-01: `days_from_civil`.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn two(out: &mut [u8], v: u32) {
    out[0] = b'0' + (v / 10 % 10) as u8;
    out[1] = b'0' + (v % 10) as u8;
}

/// Formats Unix seconds as an IMF-fixdate. Years outside 0..=9999 are clamped.
pub fn format_http_date(secs: i64) -> [u8; HTTP_DATE_LEN] {
    let secs = secs.clamp(-62_167_219_200, 253_402_300_799);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400) as u32;
    let (y, m, d) = civil_from_days(days);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[0..3].copy_from_slice(DAYS[days.rem_euclid(7) as usize]);
    two(&mut out[5..7], d);
    out[8..11].copy_from_slice(MONTHS[(m - 1) as usize]);
    let y = y as u32;
    two(&mut out[12..14], y / 100);
    two(&mut out[14..16], y % 100);
    two(&mut out[17..19], rem / 3600);
    two(&mut out[20..22], rem / 60 % 60);
    two(&mut out[23..25], rem % 60);
    out
}

fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0u32, |a, &c| a * 10 + (c - b'0') as u32))
}

/// Parses an IMF-fixdate into Unix seconds; `None` for anything else (RFC 9110 says
/// an invalid `If-Modified-Since` is ignored).
pub fn parse_http_date(s: &[u8]) -> Option<i64> {
    let s = s.trim_ascii();
    if s.len() != HTTP_DATE_LEN || &s[3..5] != b", " || &s[25..] != b" GMT" {
        return None;
    }
    if s[7] != b' ' || s[11] != b' ' || s[16] != b' ' || s[19] != b':' || s[22] != b':' {
        return None;
    }
    let d = digits(&s[5..7])?;
    let m = MONTHS.iter().position(|n| n[..] == s[8..11])? as u32 + 1;
    let y = digits(&s[12..16])? as i64;
    let (hh, mm, ss) = (
        digits(&s[17..19])?,
        digits(&s[20..22])?,
        digits(&s[23..25])?,
    );
    if d == 0 || d > 31 || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + (hh * 3600 + mm * 60 + ss) as i64)
}

/// The current second and its IMF-fixdate, refreshed at most once a second.
#[derive(Clone, Debug)]
pub struct DateCache {
    secs: i64,
    text: [u8; HTTP_DATE_LEN],
}

impl DateCache {
    /// A cache holding the current time.
    pub fn new() -> DateCache {
        let secs = now_secs();
        DateCache {
            secs,
            text: format_http_date(secs),
        }
    }
    /// Re-reads the clock (cheap: a vDSO call), reformatting only on a new second.
    pub fn refresh(&mut self) {
        let secs = now_secs();
        if secs != self.secs {
            self.secs = secs;
            self.text = format_http_date(secs);
        }
    }
    /// The cached date text.
    pub fn text(&self) -> &[u8; HTTP_DATE_LEN] {
        &self.text
    }
}

impl Default for DateCache {
    fn default() -> Self {
        DateCache::new()
    }
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates_round_trip() {
        assert_eq!(
            &format_http_date(784_111_777),
            b"Sun, 06 Nov 1994 08:49:37 GMT"
        );
        assert_eq!(&format_http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(
            parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        for s in [0i64, 951_782_400, 1_709_210_096, 4_102_444_800] {
            assert_eq!(parse_http_date(&format_http_date(s)), Some(s));
        }
        assert_eq!(parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37 UTC"), None);
        assert_eq!(parse_http_date(b""), None);
    }
}
