//! Listing: keyset paging over rows that share a timestamp, and what the query accepts.

use std::collections::HashSet;

use notify_shared::notification::{Channel, Priority};
use notify_shared::queue;
use notify_tests::app::details;
use notify_tests::{TestApp, factory};
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::body;

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
        "class=PROMOTIONAL",
        "category=Has%20Spaces",
    ] {
        let (status, _) = app.list(query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
    }
    let (_, error) = app.list("cursor=abc").await;
    assert_eq!(
        error["message"],
        "cursor is not valid; use the nextCursor from a previous page"
    );
    assert_eq!(
        details(&error)[0].1,
        ["cursor is not valid; use the nextCursor from a previous page"]
    );
    // With other problems beside it, the message is the usual one.
    let (_, error) = app.list("cursor=abc&limit=0").await;
    assert_eq!(error["message"], "Validation failed");
    assert_eq!(details(&error).len(), 2);
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

/// Class and category narrow every listing: alone, with a status (open and final, read
/// from different tables), and with a recipient.
#[tokio::test]
async fn class_and_category_narrow_the_listing_alone_and_with_status_or_recipient() {
    let app = TestApp::spawn().await;
    let mut expected = std::collections::HashMap::new();
    for (i, (bulk, category)) in [
        (false, "security"),
        (true, "news"),
        (true, "news"),
        (true, "offers"),
        (false, "news"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut spec = factory::Spec::to("mixed@example.com").category(category);
        if bulk {
            spec = spec.bulk();
        }
        let id = factory::create(app.pool(), spec).await.id;
        // The second one is finished: SENT is listed by walking the notifications.
        if i == 1 {
            app.db
                .execute(
                    "UPDATE notifications SET status = 'SENT', sent_at = now(), attempt_count = 1
                     WHERE id = $1",
                    &[&id],
                )
                .await;
        }
        expected.insert(id.to_string(), (bulk, category, i == 1));
    }
    let ids = |page: &serde_json::Value| -> HashSet<String> {
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|item| item["id"].as_str().expect("id").to_string())
            .collect()
    };
    let want = |keep: &dyn Fn(bool, &str, bool) -> bool| -> HashSet<String> {
        expected
            .iter()
            .filter(|(_, (bulk, category, sent))| keep(*bulk, category, *sent))
            .map(|(id, _)| id.clone())
            .collect()
    };
    for (query, keep) in [
        (
            "class=BULK",
            &(|b: bool, _: &str, _: bool| b) as &dyn Fn(bool, &str, bool) -> bool,
        ),
        ("category=news", &|_, c, _| c == "news"),
        ("class=BULK&category=news", &|b, c, _| b && c == "news"),
        ("class=BULK&category=news&status=PENDING", &|b, c, s| {
            b && c == "news" && !s
        }),
        ("class=BULK&category=news&status=SENT", &|b, c, s| {
            b && c == "news" && s
        }),
        (
            "class=TRANSACTIONAL&recipient=mixed%40example.com",
            &|b, _, _| !b,
        ),
    ] {
        let (status, page) = app.list(query).await;
        assert_eq!(status, StatusCode::OK, "{query}: {page}");
        let got = ids(&page);
        assert_eq!(got, want(keep), "{query}");
        assert!(!got.is_empty(), "{query} matches something");
    }
}

/// A route that reads no query string refuses a parameter as a list refuses one it does
/// not know, so `?dryRun=true` on a cancel cannot pass for obeyed; the lists, the
/// unsubscribe link and `/health` keep theirs.
#[tokio::test]
async fn a_route_that_reads_no_query_refuses_a_parameter_and_does_nothing() {
    let app = TestApp::spawn().await;
    let (_, created) = app.create(&body("no-query")).await;
    let id = created["id"].as_str().expect("id").to_string();
    for (method, path, field) in [
        (
            Method::DELETE,
            format!("/notifications/{id}?dryRun=true"),
            "dryRun",
        ),
        (
            Method::GET,
            format!("/notifications/{id}?fields=status"),
            "fields",
        ),
        (
            Method::POST,
            "/notifications/retry?force=1".to_string(),
            "force",
        ),
        (Method::GET, "/digest?since=1h&x=2".to_string(), "since"),
    ] {
        let reply = app.send(app.request(method.clone(), &path)).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{method} {path}: {}",
            reply.body
        );
        assert_eq!(
            details(&reply.body),
            [(
                field.to_string(),
                vec![format!("property {field} should not exist")]
            )],
            "{method} {path}"
        );
    }
    let (status, unchanged) = app.get(&id).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        unchanged["status"], "PENDING",
        "the refused cancel did nothing"
    );
    // A body that would be refused is not read first: the parameter is the answer.
    let reply = app
        .send(
            app.request(Method::POST, "/notifications?x=1")
                .json(&body("no-query-post")),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    let (_, page) = app.list("").await;
    assert_eq!(
        page["items"].as_array().map(Vec::len),
        Some(1),
        "nothing created"
    );

    for path in [
        "/notifications?limit=1",
        "/campaigns?limit=1",
        "/templates?limit=1",
        "/health?probe=1",
    ] {
        let reply = app.send(app.request(Method::GET, path)).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.body);
    }
    let (status, _) = app.cancel(&id).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "without the parameter the cancel goes through"
    );
}
