//! Date-times as the API accepts them: strict ISO 8601 with `T` and an explicit offset,
//! `Z` or `±HH:MM` only; the messages name the field.

use chrono::{DateTime, FixedOffset, NaiveDateTime, Utc};

/// `text` as an instant, or the message for `field`.
pub fn parse_iso(field: &str, text: &str) -> Result<DateTime<Utc>, String> {
    match parse_iso_date_time(text) {
        Ok(at) => Ok(at),
        Err(Unreadable::Invalid) => Err(format!("{field} must be a valid ISO 8601 date-time")),
        Err(Unreadable::NoOffset) => Err(format!(
            "{field} must include a timezone offset (Z or ±HH:MM)"
        )),
    }
}

/// Why a date-time was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    Invalid,
    /// A date-time without an offset, or with one in another spelling (`+0100`).
    NoOffset,
}

pub fn parse_iso_date_time(text: &str) -> Result<DateTime<Utc>, Unreadable> {
    const INVALID: Unreadable = Unreadable::Invalid;
    const NO_OFFSET: Unreadable = Unreadable::NoOffset;
    // The date part must be exactly YYYY-MM-DD followed by 'T'.
    let bytes = text.as_bytes();
    let shaped = bytes.len() >= 16
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T';
    if !shaped || !text.is_ascii() {
        return Err(INVALID);
    }
    if !has_offset(bytes) {
        // No offset, or one in another spelling (+0100, +01): the message says which.
        let time = &text[11..];
        let naive = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
            .iter()
            .any(|format| NaiveDateTime::parse_from_str(text, format).is_ok());
        return Err(if naive || time.contains(['+', '-']) {
            NO_OFFSET
        } else {
            INVALID
        });
    }
    if !strict_time_of_day(bytes) {
        return Err(INVALID);
    }
    let with_offset = text
        .strip_suffix('Z')
        .map(|s| format!("{s}+00:00"))
        .unwrap_or_else(|| text.to_string());
    ["%Y-%m-%dT%H:%M:%S%.f%:z", "%Y-%m-%dT%H:%M%:z"]
        .iter()
        .find_map(|format| DateTime::<FixedOffset>::parse_from_str(&with_offset, format).ok())
        .map(|at| at.with_timezone(&Utc))
        .ok_or(INVALID)
}

/// Between the date and the offset exactly `HH:MM`, `HH:MM:SS` or `HH:MM:SS.fraction` (1–9
/// digits), seconds below 60: chrono's formats alone let whitespace before the offset
/// through, and read a second 60 as the next minute.
fn strict_time_of_day(bytes: &[u8]) -> bool {
    let offset_len = if bytes.ends_with(b"Z") { 1 } else { 6 };
    let Some(time) = bytes.get(11..bytes.len().saturating_sub(offset_len)) else {
        return false;
    };
    let digits = |b: &[u8]| !b.is_empty() && b.iter().all(u8::is_ascii_digit);
    let [h1, h2, b':', m1, m2, seconds @ ..] = time else {
        return false;
    };
    if !digits(&[*h1, *h2, *m1, *m2]) {
        return false;
    }
    match seconds {
        [] => true,
        [b':', b'0'..=b'5', s2, fraction @ ..] if s2.is_ascii_digit() => match fraction {
            [] => true,
            [b'.', fraction @ ..] => digits(fraction) && fraction.len() <= 9,
            _ => false,
        },
        _ => false,
    }
}

/// Ends in `Z` or `±HH:MM`, the only offsets the contract allows.
fn has_offset(bytes: &[u8]) -> bool {
    if bytes.ends_with(b"Z") {
        return true;
    }
    let Some(offset) = bytes.len().checked_sub(6).map(|start| &bytes[start..]) else {
        return false;
    };
    matches!(offset[0], b'+' | b'-')
        && offset[1..3].iter().all(u8::is_ascii_digit)
        && offset[3] == b':'
        && offset[4..6].iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_z_and_colon_offsets_pass_and_the_message_names_the_field() {
        assert_eq!(
            parse_iso("sendAt", "2026-09-24T12:00:00"),
            Err("sendAt must include a timezone offset (Z or ±HH:MM)".into())
        );
        for other_spelling in ["2026-09-24T09:30:00+0100", "2026-09-24T09:30:00+01"] {
            assert_eq!(
                parse_iso_date_time(other_spelling),
                Err(Unreadable::NoOffset)
            );
        }
        for bad in [
            "2026-09-24",
            "24/09/2026 12:00",
            "2026-09-24 12:00:00Z",
            "2026-13-01T00:00:00Z",
            "tomorrow",
        ] {
            assert_eq!(
                parse_iso("expiresAt", bad),
                Err("expiresAt must be a valid ISO 8601 date-time".into()),
                "{bad}"
            );
        }
        for loose in [
            "2027-01-01T00:00:00 Z",
            "2027-01-01T00:00:00\tZ",
            "2027-01-01T00:00:00 +01:00",
            "2027-06-30T12:00:60Z",
            "2027-01-01T00:00:5Z",
            "2027-01-01T00:00:00.Z",
            "2027-01-01T00:00:00.1234567890Z",
            "2027-01-01T0:00:00Z",
        ] {
            assert_eq!(
                parse_iso_date_time(loose),
                Err(Unreadable::Invalid),
                "{loose}"
            );
        }
        for fine in [
            "2027-01-01T00:00Z",
            "2027-01-01T23:59:59.123456789Z",
            "2027-01-01T23:59:59.5-05:30",
        ] {
            assert!(parse_iso_date_time(fine).is_ok(), "{fine}");
        }
        let a = parse_iso_date_time("2026-09-24T09:30:00+01:00").expect("offset");
        let b = parse_iso_date_time("2026-09-24T08:30:00.000Z").expect("zulu");
        assert_eq!(a, b);
    }
}
