//! Quiet hours 22:00–08:00 through the API, in `America/New_York` across both daylight
//! saving changes of the coming year and in `Asia/Kolkata` (+05:30). The expected instants
//! are written out by hand: a fixed-offset computation would miss each DST case by an hour.

use chrono::{DateTime, Datelike, NaiveDate, Utc, Weekday};
use notify_tests::TestApp;
use serde_json::{Value, json};

use super::put_profile;

/// The `n`th `weekday` of `month` in `year`.
fn nth_weekday(year: i32, month: u32, weekday: Weekday, n: u8) -> NaiveDate {
    NaiveDate::from_weekday_of_month_opt(year, month, weekday, n).expect("date")
}

/// The first date of the form `make(year)` at least two days from now (so a `sendAt` on
/// the evening before is still in the future).
fn next(make: impl Fn(i32) -> NaiveDate) -> NaiveDate {
    let soon = Utc::now().date_naive() + chrono::TimeDelta::days(2);
    (soon.year()..)
        .map(&make)
        .find(|date| *date >= soon)
        .expect("a coming date")
}

/// Whether `date` is inside intake's horizon (sendAt at most 365 days ahead). A change
/// that happened in the last week or so is next due just beyond it; its cases wait for
/// another day (the unit tests of `audience::quiet` cover any year).
fn within_horizon(date: NaiveDate) -> bool {
    let horizon = Utc::now().date_naive() + chrono::TimeDelta::days(363);
    let ok = date <= horizon;
    if !ok {
        println!("{date} is beyond sendAt's horizon today; its cases are skipped");
    }
    ok
}

/// Creates a notification due at `send_at` (an ISO time with offset) for `recipient`.
async fn due_at(app: &TestApp, key: &str, recipient: &str, class: &str, send_at: &str) -> Value {
    let (status, body) = app
        .create(&json!({
            "idempotencyKey": key, "recipientId": recipient, "channel": "EMAIL",
            "priority": "NORMAL", "class": class, "category": "news", "sendAt": send_at,
            "payload": {"subject": "s", "text": "t"},
        }))
        .await;
    assert_eq!(status, 201, "{body}");
    body
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).expect("time").to_utc()
}

fn scheduled(notification: &Value) -> DateTime<Utc> {
    at(notification["scheduledAt"].as_str().expect("scheduledAt"))
}

/// `(sendAt, class, expected scheduledAt, moved)` for recipient `who`.
async fn expect(app: &TestApp, label: &str, cases: &[(String, &str, String, bool)]) {
    let who = label.split('-').next().unwrap_or(label);
    for (i, (send_at, class, expected, moved)) in cases.iter().enumerate() {
        let body = due_at(app, &format!("{label}-{i}"), who, class, send_at).await;
        assert_eq!(
            scheduled(&body),
            at(expected),
            "{who} case {i}: {send_at} {class}: {body}"
        );
        assert_eq!(
            !body["quietHoursDeferredFrom"].is_null(),
            *moved,
            "{who} case {i}: {body}"
        );
        if *moved {
            assert_eq!(
                at(body["quietHoursDeferredFrom"].as_str().expect("from")),
                at(send_at)
            );
        }
    }
}

#[tokio::test]
async fn new_york_across_both_dst_changes_and_kolkata_at_a_half_hour_offset() {
    let app = TestApp::spawn().await;
    let window = json!({"start": "22:00", "end": "08:00"});
    put_profile(
        &app,
        "ny",
        json!({"email": "ny@example.com", "timezone": "America/New_York", "quietHours": window}),
    )
    .await;
    put_profile(
        &app,
        "in",
        json!({"email": "in@example.com", "timezone": "Asia/Kolkata", "quietHours": window}),
    )
    .await;
    // Spring forward: the second Sunday of March, 02:00 EST becomes 03:00 EDT.
    let spring = next(|y| nth_weekday(y, 3, Weekday::Sun, 2));
    // Fall back: the first Sunday of November, 02:00 EDT becomes 01:00 EST.
    let fall = next(|y| nth_weekday(y, 11, Weekday::Sun, 1));
    let eve = |day: NaiveDate| day.pred_opt().expect("previous day");
    let spring_cases = [
        // 01:30 EST, inside; the window ends at 08:00 EDT = 12:00Z, not 13:00Z.
        (
            format!("{spring}T01:30:00-05:00"),
            "BULK",
            format!("{spring}T12:00:00Z"),
            true,
        ),
        // 23:00 EST the evening before, crossing midnight and the change.
        (
            format!("{}T23:00:00-05:00", eve(spring)),
            "BULK",
            format!("{spring}T12:00:00Z"),
            true,
        ),
        // Transactional is never moved.
        (
            format!("{spring}T01:30:00-05:00"),
            "TRANSACTIONAL",
            format!("{spring}T06:30:00Z"),
            false,
        ),
    ];
    let fall_cases = [
        // 23:00 EDT the evening before fall back: 08:00 EST = 13:00Z, not 12:00Z.
        (
            format!("{}T23:00:00-04:00", eve(fall)),
            "BULK",
            format!("{fall}T13:00:00Z"),
            true,
        ),
        // 01:30 happens twice that night; the second (EST) is still inside.
        (
            format!("{fall}T01:30:00-05:00"),
            "BULK",
            format!("{fall}T13:00:00Z"),
            true,
        ),
        // 08:00 is the end: the window is half-open, so it goes out as asked.
        (
            format!("{fall}T08:00:00-05:00"),
            "BULK",
            format!("{fall}T13:00:00Z"),
            false,
        ),
        // 21:59 is outside; 22:00 is inside.
        (
            format!("{fall}T21:59:00-05:00"),
            "BULK",
            format!("{}T02:59:00Z", fall.succ_opt().expect("day")),
            false,
        ),
        (
            format!("{}T23:00:00-04:00", eve(fall)),
            "TRANSACTIONAL",
            format!("{fall}T03:00:00Z"),
            false,
        ),
    ];
    assert!(
        within_horizon(spring) || within_horizon(fall),
        "one change is always near"
    );
    if within_horizon(spring) {
        expect(&app, "ny-spring", &spring_cases).await;
    }
    if within_horizon(fall) {
        expect(&app, "ny-fall", &fall_cases).await;
    }

    // India keeps no daylight saving: any day will do.
    let day = Utc::now().date_naive() + chrono::TimeDelta::days(30);
    let next_day = day.succ_opt().expect("day");
    let in_cases = [
        // 23:15 IST → 08:00 IST next day = 02:30Z.
        (
            format!("{day}T23:15:00+05:30"),
            "BULK",
            format!("{next_day}T02:30:00Z"),
            true,
        ),
        // 03:00 IST, after midnight → 08:00 IST the same day.
        (
            format!("{next_day}T03:00:00+05:30"),
            "BULK",
            format!("{next_day}T02:30:00Z"),
            true,
        ),
        // The same instant given in UTC is the same local time.
        (
            format!("{day}T17:45:00Z"),
            "BULK",
            format!("{next_day}T02:30:00Z"),
            true,
        ),
        // Noon is outside.
        (
            format!("{day}T12:00:00+05:30"),
            "BULK",
            format!("{day}T06:30:00Z"),
            false,
        ),
        (
            format!("{day}T23:15:00+05:30"),
            "TRANSACTIONAL",
            format!("{day}T17:45:00Z"),
            false,
        ),
    ];
    expect(&app, "in", &in_cases).await;
}

#[tokio::test]
async fn a_window_that_ends_inside_the_spring_gap_ends_when_the_gap_does() {
    let app = TestApp::spawn().await;
    // 02:30 does not exist in New York on spring-forward night: the window ends at 03:00
    // EDT (07:00Z), the first instant after the gap.
    put_profile(
        &app,
        "gap",
        json!({"email": "gap@example.com", "timezone": "America/New_York",
               "quietHours": {"start": "22:00", "end": "02:30"}}),
    )
    .await;
    let spring = next(|y| nth_weekday(y, 3, Weekday::Sun, 2));
    if !within_horizon(spring) {
        return;
    }
    let eve = spring.pred_opt().expect("day");
    expect(
        &app,
        "gap",
        &[(
            format!("{eve}T23:00:00-05:00"),
            "BULK",
            format!("{spring}T07:00:00Z"),
            true,
        )],
    )
    .await;
}
