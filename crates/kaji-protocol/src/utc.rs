//! Calendar dates and times in UTC from Unix time, as kaji writes them:
//! RFC 3339 in files and logs, short forms in listings. Pure arithmetic on
//! the proleptic Gregorian calendar; it never reads the clock (callers pass
//! the time) and knows no time zone but UTC.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

/// One instant in UTC, broken into calendar fields; years 0 to 9999, the
/// range RFC 3339 can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcDateTime {
    /// 0 to 9999.
    pub year: i32,
    /// 1 to 12.
    pub month: u8,
    /// 1 to 31.
    pub day: u8,
    /// 0 to 23.
    pub hour: u8,
    /// 0 to 59.
    pub minute: u8,
    /// 0 to 59 (Unix time has no leap seconds).
    pub second: u8,
    /// 0 to 999,999,999.
    pub nanosecond: u32,
}

/// Seconds from 0000-01-01T00:00:00Z to the Unix epoch.
const YEAR_0_TO_EPOCH: i64 = 62_167_219_200;
/// Seconds from the Unix epoch to 10000-01-01T00:00:00Z.
const EPOCH_TO_YEAR_10000: i64 = 253_402_300_800;

impl UtcDateTime {
    /// 1970-01-01T00:00:00Z.
    pub const EPOCH: Self = Self {
        year: 1970,
        month: 1,
        day: 1,
        hour: 0,
        minute: 0,
        second: 0,
        nanosecond: 0,
    };

    /// The instant `secs` seconds and `nanos` nanoseconds after the Unix
    /// epoch; `None` outside years 0 to 9999 or for `nanos` ≥ 10⁹.
    pub fn from_unix(secs: i64, nanos: u32) -> Option<Self> {
        if !(-YEAR_0_TO_EPOCH..EPOCH_TO_YEAR_10000).contains(&secs) || nanos >= 1_000_000_000 {
            return None;
        }
        let days = secs.div_euclid(86_400);
        let of_day = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        Some(Self {
            year,
            month,
            day,
            hour: (of_day / 3600) as u8,
            minute: (of_day / 60 % 60) as u8,
            second: (of_day % 60) as u8,
            nanosecond: nanos,
        })
    }

    /// The instant `millis` milliseconds after the Unix epoch.
    pub fn from_unix_millis(millis: u64) -> Option<Self> {
        let secs = i64::try_from(millis / 1000).ok()?;
        Self::from_unix(secs, (millis % 1000) as u32 * 1_000_000)
    }

    /// `time` as a calendar instant; `None` outside years 0 to 9999.
    pub fn from_system_time(time: SystemTime) -> Option<Self> {
        match time.duration_since(UNIX_EPOCH) {
            Ok(after) => {
                Self::from_unix(i64::try_from(after.as_secs()).ok()?, after.subsec_nanos())
            }
            Err(before) => {
                let before = before.duration();
                let mut secs = -i64::try_from(before.as_secs()).ok()?;
                let mut nanos = before.subsec_nanos();
                if nanos > 0 {
                    secs -= 1;
                    nanos = 1_000_000_000 - nanos;
                }
                Self::from_unix(secs, nanos)
            }
        }
    }

    /// `2026-12-02T04:50:01.123Z`: RFC 3339, the fraction of a second only
    /// when there is one, without trailing zeros.
    pub fn rfc3339(&self) -> String {
        let mut text = format!(
            "{}T{:02}:{:02}:{:02}",
            self.date(),
            self.hour,
            self.minute,
            self.second
        );
        if self.nanosecond > 0 {
            let digits = format!("{:09}", self.nanosecond);
            let _ = write!(text, ".{}", digits.trim_end_matches('0'));
        }
        text.push('Z');
        text
    }

    /// `2026-12-02`.
    pub fn date(&self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }

    /// `2026-12-02 04:50`, for listings.
    pub fn to_minute(&self) -> String {
        format!("{} {:02}:{:02}", self.date(), self.hour, self.minute)
    }

    /// `2026-12-02 04:50:01`, for listings.
    pub fn to_second(&self) -> String {
        format!("{}:{:02}", self.to_minute(), self.second)
    }
}

/// Year, month and day of the day `days` after 1970-01-01 (Howard
/// Hinnant's `civil_from_days`: eras of 400 years starting in March).
fn civil_from_days(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u8;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u8;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year as i32, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rfc3339(secs: i64, nanos: u32) -> String {
        UtcDateTime::from_unix(secs, nanos)
            .map(|t| t.rfc3339())
            .unwrap_or_default()
    }

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(UtcDateTime::from_unix(0, 0), Some(UtcDateTime::EPOCH));
        assert_eq!(rfc3339(951_782_400, 0), "2000-02-29T00:00:00Z");
        assert_eq!(
            rfc3339(1_796_187_001, 123_000_000),
            "2026-12-02T04:50:01.123Z"
        );
        assert_eq!(rfc3339(-1, 999_999_999), "1969-12-31T23:59:59.999999999Z");
        assert_eq!(rfc3339(0, 1), "1970-01-01T00:00:00.000000001Z");
        assert_eq!(rfc3339(0, 100_000_000), "1970-01-01T00:00:00.1Z");
        assert_eq!(rfc3339(-YEAR_0_TO_EPOCH, 0), "0000-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(EPOCH_TO_YEAR_10000 - 1, 5),
            "9999-12-31T23:59:59.000000005Z"
        );
        assert_eq!(UtcDateTime::from_unix(EPOCH_TO_YEAR_10000, 0), None);
        assert_eq!(UtcDateTime::from_unix(-YEAR_0_TO_EPOCH - 1, 0), None);
        assert_eq!(UtcDateTime::from_unix(0, 1_000_000_000), None);
    }

    #[test]
    fn short_forms() {
        let t = UtcDateTime::from_unix_millis(1_796_187_001_999).unwrap_or_else(|| panic!());
        assert_eq!(t.to_minute(), "2026-12-02 04:50");
        assert_eq!(t.to_second(), "2026-12-02 04:50:01");
        assert_eq!(t.rfc3339(), "2026-12-02T04:50:01.999Z");
    }

    #[test]
    fn system_time_before_and_after_the_epoch() {
        let after = UNIX_EPOCH + Duration::new(86_400 + 61, 7);
        assert_eq!(
            UtcDateTime::from_system_time(after).map(|t| t.rfc3339()),
            Some("1970-01-02T00:01:01.000000007Z".to_string())
        );
        let before = UNIX_EPOCH - Duration::new(0, 250_000_000);
        assert_eq!(
            UtcDateTime::from_system_time(before).map(|t| t.rfc3339()),
            Some("1969-12-31T23:59:59.75Z".to_string())
        );
    }

    /// Every day from year 0 to 9999 follows the one before it: the day
    /// counts up within its month, and months and years roll over where
    /// the Gregorian calendar says (leap years by the 4/100/400 rule).
    #[test]
    fn every_day_follows_the_one_before() {
        let first = -YEAR_0_TO_EPOCH / 86_400;
        let last = EPOCH_TO_YEAR_10000 / 86_400;
        let mut previous = civil_from_days(first);
        assert_eq!(previous, (0, 1, 1));
        for days in first + 1..last {
            let (year, month, day) = civil_from_days(days);
            let (py, pm, pd) = previous;
            let leap = py % 4 == 0 && (py % 100 != 0 || py % 400 == 0);
            let month_len = match pm {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            let expected = if pd < month_len {
                (py, pm, pd + 1)
            } else if pm < 12 {
                (py, pm + 1, 1)
            } else {
                (py + 1, 1, 1)
            };
            assert_eq!((year, month, day), expected, "day {days} after the epoch");
            previous = (year, month, day);
        }
        assert_eq!(previous, (9999, 12, 31));
    }
}
