//! Listing: keyset paging over rows that share a timestamp, and what the query accepts.

use std::collections::HashSet;

use notify_shared::notification::{Channel, Priority};
use notify_shared::queue;
use notify_tests::app::details;
use notify_tests::{TestApp, factory};
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn paging_rows_that_share_one_created_at_skips_and_repeats_nothing() {
    let app = TestApp::spawn().await;
    {
        let mut connection = app.pool().get().await.expect("db");
        let transaction = connection.transaction().await.expect("tx");
        for i in 0..23 {
            let mut new = queue::NewNotification::new(
                format!("same-time-{i}"),
                "0".repeat(64),
                "pager@example.com".into(),
                Channel::Push,
                json!({}),
                queue::Due::AfterSeconds(3600),
                6,
            );
            new.priority = Priority::Low;
            queue::insert(&transaction, &new).await.expect("insert");
        }
        transaction.commit().await.expect("commit");
    }
    assert_eq!(
        factory::count_where(
            app.pool(),
            "created_at = (SELECT min(created_at) FROM notifications)"
        )
        .await,
        23
    );

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut query = "limit=5&recipient=pager%40example.com".to_string();
        if let Some(cursor) = &cursor {
            query.push_str(&format!("&cursor={cursor}"));
        }
        let (status, page) = app.list(&query).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        pages += 1;
        for item in page["items"].as_array().expect("items") {
            seen.push(item["id"].as_str().expect("id").to_string());
        }
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(pages, 5);
    assert_eq!(seen.len(), 23);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 23);
}

#[tokio::test]
async fn list_rejects_unknown_parameters_bad_limits_and_foreign_cursors() {
    let app = TestApp::spawn().await;
    for query in [
        "limit=0",
        "limit=101",
        "limit=ten",
        "status=DONE",
        "cursor=abc",
        "sort=asc",
        "limit=5&limit=6",
    ] {
        let (status, _) = app.list(query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
    }
    let (_, error) = app.list("cursor=abc").await;
    assert_eq!(
        details(&error)[0].1,
        ["cursor is not valid; use the nextCursor from a previous page"]
    );
    let (status, page) = app.list("status=DEAD_LETTERED&limit=100").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page, json!({"items": [], "nextCursor": null}));
}

/// A cursor that decodes but names a time PostgreSQL cannot hold (before 4713 BC) is
/// refused as invalid, not passed to the database.
#[tokio::test]
async fn a_crafted_cursor_with_an_impossible_time_is_a_400() {
    use base64::Engine;
    let app = TestApp::spawn().await;
    let cursor = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(format!("-210866803200000001:{}", uuid::Uuid::nil()));
    let (status, body) = app.list(&format!("cursor={cursor}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        details(&body),
        [(
            "cursor".to_string(),
            vec!["cursor is not valid; use the nextCursor from a previous page".to_string()]
        )]
    );
}
