//! One-click unsubscribe: the headers a bulk email carries, the link they point at, a GET
//! that changes nothing, forged and altered tokens, repeats, bare addresses, and an
//! unsubscribe in the middle of a slow drain.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use notify_local::aws_stub::AwsStub;
use notify_shared::audience::unsubscribe::Unsubscribe;
use notify_shared::provider::{Attempt, Delivery, Gate, Provider};
use notify_tests::TestApp;
use notify_tests::doubles::{DELIVERED, each_delivery};
use notify_tests::worker::{self, worker_config};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{click_new_link, notification, one_click, put_profile, unsubscribe_token};
use crate::delivery::{self, ses_only};

async fn preferences(app: &TestApp, id: &str) -> Value {
    let (status, body) = app
        .send(app.request(Method::GET, &format!("/recipients/{id}/preferences")))
        .await
        .pair();
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn stored_anything(app: &TestApp) -> i64 {
    app.db
        .count("SELECT (SELECT count(*) FROM recipient_preferences) + (SELECT count(*) FROM suppressions)")
        .await
}

#[tokio::test]
async fn a_bulk_email_carries_the_rfc_8058_headers_and_its_link_unsubscribes_the_category() {
    let app = TestApp::spawn().await;
    put_profile(&app, "ada", json!({"email": "ada@example.com"})).await;
    for (key, class) in [("bulk", "BULK"), ("receipt", "TRANSACTIONAL")] {
        let body = notification(
            key,
            json!({"recipientId": "ada"}),
            "EMAIL",
            class,
            "news",
            0,
        );
        assert_eq!(app.create(&body).await.0, StatusCode::CREATED);
    }
    let stub = AwsStub::start().await.expect("stub");
    let providers = ses_only(app.pool(), &stub.url()).await;
    let sweeper = delivery::sweeper(app.pool(), providers, delivery::circuit());
    worker::sweep_until_idle(&sweeper).await;

    let calls = stub.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    let header = |call: &notify_local::aws_stub::Call, name: &str| {
        call.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let with_link: Vec<_> = calls
        .iter()
        .filter(|c| header(c, "List-Unsubscribe").is_some())
        .collect();
    assert_eq!(
        with_link.len(),
        1,
        "only the bulk email has the link: {calls:?}"
    );
    assert_eq!(
        header(with_link[0], "List-Unsubscribe-Post").as_deref(),
        Some("List-Unsubscribe=One-Click")
    );
    let link = header(with_link[0], "List-Unsubscribe").expect("link");
    let url = link
        .strip_prefix('<')
        .and_then(|l| l.strip_suffix('>'))
        .unwrap_or_else(|| panic!("a <URL>: {link}"));
    let token = url.rsplit('/').next().expect("token");
    assert!(
        url.starts_with("http://") && url.contains("/unsubscribe/"),
        "{url}"
    );

    // What a mail client does with it.
    let (status, body) = one_click(&app, token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["category"], "news");
    assert_eq!(
        preferences(&app, "ada").await,
        json!({"categories": {"news": {"EMAIL": false, "SMS": true, "PUSH": true}}})
    );
    let again = notification(
        "bulk-2",
        json!({"recipientId": "ada"}),
        "EMAIL",
        "BULK",
        "news",
        0,
    );
    let (_, created) = app.create(&again).await;
    assert_eq!(created["suppressedReason"], "CATEGORY_OPT_OUT");
}

#[tokio::test]
async fn a_get_shows_a_page_and_changes_nothing_and_a_repeat_is_harmless() {
    let app = TestApp::spawn().await;
    put_profile(&app, "bo", json!({"email": "bo@example.com"})).await;
    let token = unsubscribe_token(
        &app,
        json!({"channel": "EMAIL", "category": "promo", "recipientId": "bo"}),
    )
    .await;
    let page = app
        .send(app.request(Method::GET, &format!("/unsubscribe/{token}")))
        .await;
    assert_eq!(page.status, StatusCode::OK);
    let html = page.body.as_str().expect("a page");
    assert!(html.contains("<form method=\"post\""), "{html}");
    assert!(html.contains("name=\"List-Unsubscribe\" value=\"One-Click\""));
    assert!(
        !html.contains("bo@example.com"),
        "the page shows no address"
    );
    assert_eq!(stored_anything(&app).await, 0, "a GET changes nothing");

    for _ in 0..2 {
        let (status, body) = one_click(&app, &token).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM recipient_preferences")
            .await,
        1
    );

    // Without RFC 8058's body nothing happens: a link scanner's empty POST is refused.
    put_profile(&app, "cy", json!({"email": "cy@example.com"})).await;
    let other = unsubscribe_token(
        &app,
        json!({"channel": "EMAIL", "category": "promo", "recipientId": "cy"}),
    )
    .await;
    let (status, _) = app
        .send(
            app.request(Method::POST, &format!("/unsubscribe/{other}"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body("foo=bar"),
        )
        .await
        .pair();
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(preferences(&app, "cy").await, json!({"categories": {}}));

    // The body ended by a line break, as some senders write it, is RFC 8058's all the same.
    let (status, body) = app
        .send(
            app.request(Method::POST, &format!("/unsubscribe/{other}"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body("List-Unsubscribe=One-Click\r\n"),
        )
        .await
        .pair();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        preferences(&app, "cy").await["categories"]["promo"]["EMAIL"],
        json!(false)
    );
}

/// The click may come before the client has created the profile, or after it was erased
/// and before it is created again: the opt-out is kept and applies once the profile exists.
#[tokio::test]
async fn an_opt_out_clicked_before_the_profile_exists_applies_once_it_does() {
    let app = TestApp::spawn().await;
    let token = click_new_link(
        &app,
        json!({"channel": "SMS", "category": "promo", "recipientId": "later"}),
    )
    .await;
    put_profile(&app, "later", json!({"phone": "+15550001111"})).await;
    assert_eq!(
        preferences(&app, "later").await["categories"]["promo"]["SMS"],
        false
    );
    let bulk = |key: &str| {
        notification(
            key,
            json!({"recipientId": "later"}),
            "SMS",
            "BULK",
            "promo",
            60,
        )
    };
    let (status, created) = app
        .send(
            app.request(Method::POST, "/notifications")
                .json(&bulk("first")),
        )
        .await
        .pair();
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["status"], "SUPPRESSED");
    assert_eq!(created["suppressedReason"], "CATEGORY_OPT_OUT");

    // Erasure forgets the preferences with the profile; a click after it is kept again.
    let erased = app
        .send(app.request(Method::DELETE, "/recipients/later"))
        .await;
    assert_eq!(erased.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM recipient_preferences WHERE recipient_id = 'later'")
            .await,
        0
    );
    let (status, body) = one_click(&app, &token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    put_profile(&app, "later", json!({"phone": "+15550001111"})).await;
    assert_eq!(
        preferences(&app, "later").await["categories"]["promo"]["SMS"],
        false
    );
}

/// What was kept under an id without a profile (an opt-out clicked before it existed) is
/// erased all the same; erasing an id with nothing left under it is a 204 too.
#[tokio::test]
async fn erasing_an_id_without_a_profile_forgets_its_opt_outs() {
    let app = TestApp::spawn().await;
    click_new_link(
        &app,
        json!({"channel": "EMAIL", "category": "news", "recipientId": "ghost"}),
    )
    .await;
    let kept = "SELECT count(*) FROM recipient_preferences WHERE recipient_id = 'ghost'";
    assert_eq!(app.db.count(kept).await, 1);
    let erase = || app.send(app.request(Method::DELETE, "/recipients/ghost"));
    // A notification suppressed for want of an address is kept under the id too.
    let (status, created) = app
        .send(
            app.request(Method::POST, "/notifications")
                .json(&notification(
                    "to-ghost",
                    json!({"recipientId": "ghost"}),
                    "EMAIL",
                    "TRANSACTIONAL",
                    "news",
                    60,
                )),
        )
        .await
        .pair();
    assert_eq!(
        (status, &created["suppressedReason"]),
        (StatusCode::CREATED, &json!("NO_ADDRESS"))
    );
    assert_eq!(erase().await.status, StatusCode::NO_CONTENT);
    assert_eq!(app.db.count(kept).await, 0);
    // Once redacted, nothing is left under the id, and erasing it again holds as well.
    assert_eq!(erase().await.status, StatusCode::NO_CONTENT);
    assert_eq!(app.db.count(kept).await, 0);
    let never = app
        .send(app.request(Method::DELETE, "/recipients/never-stored"))
        .await;
    assert_eq!(never.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn forged_and_altered_tokens_are_refused_and_change_nothing() {
    let app = TestApp::spawn().await;
    put_profile(&app, "di", json!({"email": "di@example.com"})).await;
    let token = unsubscribe_token(
        &app,
        json!({"channel": "EMAIL", "category": "news", "recipientId": "di"}),
    )
    .await;
    let (body, signature) = token.split_once('.').expect("two parts");
    // The same claim signed with another key, the signature altered, the body altered,
    // and no signature at all.
    let unsubscribe = Unsubscribe::verify(&token, notify_shared::config::DEVELOPMENT_SECRET)
        .expect("the service's own token");
    let forged = unsubscribe.token(b"an attacker's key of their own choosing");
    let flipped = {
        let mut chars: Vec<char> = signature.chars().collect();
        chars[0] = if chars[0] == 'A' { 'B' } else { 'A' };
        format!("{body}.{}", chars.into_iter().collect::<String>())
    };
    let other_body = {
        let mut everyone = unsubscribe.clone();
        everyone.category = "*".into();
        let (other, _) = everyone
            .token(b"x")
            .split_once('.')
            .map(|(b, s)| (b.to_string(), s.to_string()))
            .expect("parts");
        format!("{other}.{signature}")
    };
    for bad in [
        forged,
        flipped,
        other_body,
        body.to_string(),
        "garbage".to_string(),
    ] {
        let (status, reply) = one_click(&app, &bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {reply}");
        // A browser gets a page; any other client the error envelope.
        let page = app
            .send(
                app.request(Method::GET, &format!("/unsubscribe/{bad}"))
                    .header("accept", "text/html,application/xhtml+xml,*/*;q=0.8"),
            )
            .await;
        assert_eq!(page.status, StatusCode::BAD_REQUEST, "{bad}");
        let kind = page
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok());
        assert!(
            kind.is_some_and(|k| k.starts_with("text/html")),
            "a page: {kind:?}"
        );
        let (status, envelope) = app
            .send(app.request(Method::GET, &format!("/unsubscribe/{bad}")))
            .await
            .pair();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(envelope["statusCode"], 400, "{envelope}");
        assert_eq!(envelope["details"][0]["field"], "token", "{envelope}");
        assert!(envelope["requestId"].is_string(), "{envelope}");
    }
    // A body over the limit of every body is a 413, as anywhere else.
    let token = unsubscribe_token(
        &app,
        json!({"channel": "EMAIL", "category": "news", "recipientId": "di"}),
    )
    .await;
    let oversized = format!("List-Unsubscribe=One-Click&pad={}", "x".repeat(70_000));
    let (status, reply) = app
        .send(
            app.request(Method::POST, &format!("/unsubscribe/{token}"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(oversized),
        )
        .await
        .pair();
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{reply}");
    assert_eq!(stored_anything(&app).await, 0);
}

#[tokio::test]
async fn an_address_only_link_suppresses_the_address() {
    let app = TestApp::spawn().await;
    click_new_link(
        &app,
        json!({"channel": "EMAIL", "category": "news", "address": "Eve@Example.com"}),
    )
    .await;
    let (_, list) = app
        .send(app.request(
            Method::GET,
            "/suppressions?channel=EMAIL&address=eve@example.com",
        ))
        .await
        .pair();
    assert_eq!(list["items"][0]["reason"], "UNSUBSCRIBED", "{list}");
    let body = notification(
        "to-eve",
        json!({"recipient": "eve@example.com"}),
        "EMAIL",
        "BULK",
        "news",
        0,
    );
    assert_eq!(
        app.create(&body).await.1["suppressedReason"],
        "SUPPRESSED_ADDRESS"
    );
}

/// Delivers after `delay`, remembering when each delivery started and to whom.
struct Timed {
    delay: Duration,
    started: Mutex<Vec<(String, Instant)>>,
}

impl Provider for Timed {
    fn send<'a>(
        &'a self,
        batch: &'a [Delivery<'a>],
        gate: &'a Gate,
    ) -> BoxFuture<'a, Vec<Attempt>> {
        each_delivery(gate, batch, move |d| async move {
            if let Ok(mut started) = self.started.lock() {
                started.push((d.recipient.to_string(), Instant::now()));
            }
            tokio::time::sleep(self.delay).await;
            DELIVERED
        })
        .boxed()
    }

    fn name(&self) -> &'static str {
        "timed"
    }
}

#[tokio::test]
async fn an_unsubscribe_during_a_slow_drain_stops_that_persons_remaining_sends() {
    const PEOPLE: usize = 20;
    const EACH: usize = 100;
    let app = TestApp::spawn().await;
    for p in 0..PEOPLE {
        put_profile(
            &app,
            &format!("p{p}"),
            json!({"email": format!("p{p}@example.com")}),
        )
        .await;
    }
    // Interleaved, so every person has sends left when the unsubscribe comes.
    let items: Vec<_> = (0..PEOPLE * EACH)
        .map(|i| {
            notification(
                &format!("promo-{i}"),
                json!({"recipientId": format!("p{}", i % PEOPLE)}),
                "EMAIL",
                "BULK",
                "promo",
                0,
            )
        })
        .collect();
    let (status, body) = app.create_batch(&json!({ "notifications": items })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let token = unsubscribe_token(
        &app,
        json!({"channel": "EMAIL", "category": "promo", "recipientId": "p7"}),
    )
    .await;

    let provider = Arc::new(Timed {
        delay: Duration::from_millis(10),
        started: Mutex::default(),
    });
    let sweeper = Arc::new(
        worker::sweeper(app.pool(), provider.clone())
            .config(worker_config().batch_size(20).concurrency(10))
            .build(),
    );
    let drain = tokio::spawn({
        let sweeper = sweeper.clone();
        async move { worker::sweep_until_idle(&sweeper).await }
    });
    let sent_so_far = || provider.started.lock().map(|s| s.len()).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    while sent_so_far() < 500 {
        assert!(Instant::now() < deadline, "the drain started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (status, body) = one_click(&app, &token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let committed = Instant::now();
    let outcome = drain.await.expect("drain");

    let started = provider.started.lock().expect("log").clone();
    let p7: Vec<Instant> = started
        .iter()
        .filter(|(to, _)| to == "p7@example.com")
        .map(|(_, at)| *at)
        .collect();
    // A batch that passed its send-time check before the commit may still be going out:
    // one provider call's worth of grace (10 ms per call, ten at a time, a batch of 20).
    let grace = Duration::from_millis(50);
    let late = p7.iter().filter(|at| **at > committed + grace).count();
    let during = p7.iter().filter(|at| **at > committed).count();
    println!(
        "p7: {} sent, {during} started after the commit (within {grace:?}), {outcome:?}",
        p7.len()
    );
    assert_eq!(late, 0, "sent to p7 after the unsubscribe committed");
    let suppressed = app
        .db
        .count("SELECT count(*) FROM notifications WHERE recipient_id = 'p7' AND status = 'SUPPRESSED' AND suppressed_reason = 'CATEGORY_OPT_OUT' AND attempt_count = 0")
        .await;
    assert_eq!(
        p7.len() as i64 + suppressed,
        EACH as i64,
        "each of p7's sent or suppressed"
    );
    assert!(suppressed > 0, "the drain was stopped for p7");
    assert_eq!(outcome.suppressed as i64, suppressed);
    assert_eq!(
        started.len() as i64,
        (PEOPLE * EACH) as i64 - suppressed,
        "everyone else got theirs"
    );
}

#[tokio::test]
async fn a_link_request_is_checked_like_any_other_body() {
    let app = TestApp::spawn().await;
    for body in [
        json!({"channel": "SMS", "category": "*", "address": "0", "recipientId": {}}),
        json!({"channel": "SMS", "category": "news", "address": ""}),
        json!({"channel": "EMAIL", "category": "news", "address": 7}),
        json!({"channel": "EMAIL", "category": "news"}),
        json!({"channel": "EMAIL", "category": "News", "recipientId": "ada"}),
        json!({"channel": "EMAIL", "category": "news", "recipientId": "ada", "address": "a@example.com"}),
    ] {
        let (status, reply) = app
            .send(app.request(Method::POST, "/unsubscribe-links").json(&body))
            .await
            .pair();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
    }
    let token = unsubscribe_token(
        &app,
        json!({"channel": "SMS", "category": "news", "address": "+15555550100"}),
    )
    .await;
    let (status, reply) = one_click(&app, &token).await;
    assert_eq!(
        (status, &reply["scope"]),
        (StatusCode::OK, &json!("ADDRESS")),
        "{reply}"
    );
}
