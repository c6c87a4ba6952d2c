//! Template notifications: pinned at enqueue, rendered at send in the resolved locale,
//! failed at once when they cannot be rendered.

use std::sync::Arc;

use notify_tests::TestApp;
use notify_tests::app::detail_fields;
use notify_tests::worker;
use reqwest::Method;
use serde_json::{Value, json};

use super::{call, publish, welcome};

fn templated(key: &str, template: Value) -> Value {
    json!({"recipient": "ada@example.com", "channel": "EMAIL", "priority": "NORMAL",
           "idempotencyKey": key, "delaySeconds": 1, "template": template})
}

/// What the simulated provider was handed for notification `id`.
async fn delivered(app: &TestApp, id: &str) -> Value {
    let id = uuid::Uuid::parse_str(id).expect("uuid");
    app.db
        .scalar(
            "SELECT content FROM simulated_deliveries WHERE delivery_key = $1",
            &[&id],
        )
        .await
}

async fn make_due(app: &TestApp) {
    app.db
        .execute(
            "UPDATE notifications SET next_attempt_at = now() WHERE status = 'PENDING'",
            &[],
        )
        .await;
}

#[tokio::test]
async fn a_version_published_while_one_waits_does_not_change_what_it_says() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    let (status, waiting) = app
        .create(&templated(
            "k-1",
            json!({"id": "welcome", "data": {"name": "Ada"}}),
        ))
        .await;
    assert_eq!(status, 201, "{waiting}");
    assert_eq!(waiting["template"], json!({"id": "welcome", "version": 1}));
    assert_eq!(waiting["locale"], "en");

    // v2 is published mid-drain; the waiting notification keeps v1, a new one gets v2.
    publish(&app, "welcome", &welcome("Hello")).await;
    let (_, later) = app
        .create(&templated(
            "k-2",
            json!({"id": "welcome", "data": {"name": "Bo"}}),
        ))
        .await;
    assert_eq!(later["template"]["version"], 2);
    // Replays and reads show the pinned version too.
    let (status, replayed) = app
        .create(&templated(
            "k-1",
            json!({"id": "welcome", "data": {"name": "Ada"}}),
        ))
        .await;
    assert_eq!(status, 200);
    assert_eq!(replayed["template"]["version"], 1);
    let (_, page) = app.list("limit=10").await;
    assert!(
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .all(|n| n["locale"] == "en")
    );

    make_due(&app).await;
    let provider = Arc::new(worker::simulated(app.pool().clone()));
    app.sweep_until_idle(provider).await;
    let (_, sent) = app.get(waiting["id"].as_str().expect("id")).await;
    assert_eq!(sent["status"], "SENT", "{sent}");
    assert_eq!(sent["template"]["version"], 1);
    assert_eq!(
        delivered(&app, waiting["id"].as_str().expect("id")).await,
        json!({"subject": "Hi Ada", "text": "Welcome, Ada", "html": "<p>Welcome, Ada</p>"})
    );
    assert_eq!(
        delivered(&app, later["id"].as_str().expect("id")).await["subject"],
        "Hello Bo"
    );
    // A literal payload is not copied to the ledger.
    let literal: i64 = app
        .db
        .count("SELECT count(*) FROM simulated_deliveries WHERE content IS NULL")
        .await;
    assert_eq!(literal, 0);
}

#[tokio::test]
async fn the_locale_walks_the_fallback_chain() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    let profile = call(
        &app,
        Method::PUT,
        "/recipients/ana",
        Some(&json!({"email": "ana@example.com", "locale": "pt-BR"})),
    )
    .await;
    assert_eq!(profile.status, 200, "{}", profile.body);

    let data = json!({"id": "welcome", "data": {"name": "Ana"}});
    let mut by_profile = templated("profile", data.clone());
    by_profile
        .as_object_mut()
        .expect("object")
        .remove("recipient");
    by_profile["recipientId"] = json!("ana");
    let mut overridden = by_profile.clone();
    overridden["idempotencyKey"] = json!("overridden");
    overridden["locale"] = json!("fr-CA");
    let mut explicit = templated("explicit", data.clone());
    explicit["locale"] = json!("PT-br");
    let default = templated("default", data);

    let mut ids = Vec::new();
    for (body, locale) in [
        (&by_profile, "pt"),
        (&overridden, "en"),
        (&explicit, "pt"),
        (&default, "en"),
    ] {
        let (status, created) = app.create(body).await;
        assert_eq!(status, 201, "{created}");
        assert_eq!(created["locale"], locale, "{body}");
        ids.push((created["id"].as_str().expect("id").to_string(), locale));
    }
    make_due(&app).await;
    app.sweep_until_idle(Arc::new(worker::simulated(app.pool().clone())))
        .await;
    for (id, locale) in ids {
        let subject = delivered(&app, &id).await["subject"].clone();
        let expected = if locale == "pt" {
            "Hi (pt) Ana"
        } else {
            "Hi Ana"
        };
        assert_eq!(subject, expected);
    }
}

#[tokio::test]
async fn data_that_cannot_render_fails_at_send_and_is_never_retried() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    let (_, created) = app
        .create(&templated(
            "k",
            json!({"id": "welcome", "data": {"nom": "Ada"}}),
        ))
        .await;
    make_due(&app).await;
    let outcome = app
        .sweep_until_idle(Arc::new(worker::simulated(app.pool().clone())))
        .await;
    assert_eq!(outcome.failed, 1);
    let (_, failed) = app.get(created["id"].as_str().expect("id")).await;
    assert_eq!(failed["status"], "FAILED");
    assert_eq!(failed["attemptCount"], 1);
    let error = failed["lastError"].as_str().expect("error");
    assert!(
        error.contains("locales.en.html") && error.contains("undefined"),
        "{error}"
    );
    let handed: i64 = app
        .db
        .count("SELECT count(*) FROM simulated_deliveries")
        .await;
    assert_eq!(handed, 0, "never reached the provider");

    // A retry answers with the notification as GET shows it, its template included.
    let id = created["id"].as_str().expect("id");
    let retried = call(
        &app,
        Method::POST,
        &format!("/notifications/{id}/retry"),
        None,
    )
    .await;
    assert_eq!(
        retried.status,
        reqwest::StatusCode::OK,
        "{:?}",
        retried.body
    );
    assert_eq!(retried.body["status"], "PENDING");
    let (_, shown) = app.get(id).await;
    assert_eq!(retried.body, shown);
    assert_eq!(shown["template"], json!({"id": "welcome", "version": 1}));
}

/// A rendering with a NUL in it is what no provider takes and PostgreSQL cannot store: it
/// is refused at publish (400 naming the field) and, from a notification's data, fails at
/// send on the first attempt without reaching the provider. Before, publish took it and
/// each attempt failed in the simulated provider's own statement as a temporary error,
/// retried until dead-lettered.
#[tokio::test]
async fn a_rendering_with_a_nul_is_refused_at_publish_and_fails_at_send_untried() {
    let app = TestApp::spawn().await;
    let nul_in_source = json!({"channel": "SMS", "defaultLocale": "en", "sampleData": {},
                               "locales": {"en": {"text": "{{ \"\\u0000\" }}x"}}});
    let reply = call(
        &app,
        Method::POST,
        "/templates/nul/versions",
        Some(&nul_in_source),
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(
        detail_fields(&reply.body),
        ["locales.en.text"],
        "{}",
        reply.body
    );

    publish(
        &app,
        "code",
        &json!({"channel": "SMS", "defaultLocale": "en", "sampleData": {"code": "1234"},
                "locales": {"en": {"text": "Your code is {{ code }}"}}}),
    )
    .await;
    let preview = call(
        &app,
        Method::POST,
        "/templates/code/preview",
        Some(&json!({"locale": "en", "data": {"code": "12\u{0}34"}})),
    )
    .await;
    assert_eq!(preview.status, 400, "{}", preview.body);
    assert_eq!(
        detail_fields(&preview.body),
        ["data"],
        "data never holds a NUL"
    );

    // The data itself may not hold a NUL, so it comes from a template's own logic: a
    // character code the data names.
    publish(
        &app,
        "coded",
        &json!({"channel": "SMS", "defaultLocale": "en", "sampleData": {"c": 65},
                "locales": {"en": {"text": "{{ \"%c\"|format(c) }}"}}}),
    )
    .await;
    let mut request = templated("nul-at-send", json!({"id": "coded", "data": {"c": 0}}));
    request["recipient"] = json!("+14155550100");
    request["channel"] = json!("SMS");
    let (status, created) = app.create(&request).await;
    assert_eq!(status, 201, "{created}");
    make_due(&app).await;
    let outcome = app
        .sweep_until_idle(Arc::new(worker::simulated(app.pool().clone())))
        .await;
    assert_eq!(outcome.failed, 1, "{outcome:?}");
    let (_, failed) = app.get(created["id"].as_str().expect("id")).await;
    assert_eq!(failed["status"], "FAILED");
    assert_eq!(failed["attemptCount"], 1);
    let error = failed["lastError"].as_str().expect("error");
    assert!(
        error.contains("locales.en.text") && error.contains("NUL"),
        "{error}"
    );
    let handed: i64 = app
        .db
        .count("SELECT count(*) FROM simulated_deliveries")
        .await;
    assert_eq!(handed, 0, "never reached the provider");
}

#[tokio::test]
async fn a_template_request_is_checked_at_enqueue() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    let cases = [
        (json!({"id": "nothing"}), "template.id"),
        (json!({"id": "welcome", "version": 2}), "template.version"),
        (json!({"id": "welcome", "data": [1]}), "template.data"),
        (json!({"id": "welcome", "extra": 1}), "template.extra"),
    ];
    for (template, field) in cases {
        let (status, error) = app.create(&templated("k", template.clone())).await;
        assert_eq!(status, 400, "{template}");
        assert_eq!(detail_fields(&error), [field], "{template}");
    }
    let mut both = templated("k", json!({"id": "welcome"}));
    both["payload"] = json!({"subject": "x"});
    assert_eq!(detail_fields(&app.create(&both).await.1), ["payload"]);
    let mut sms = templated("k", json!({"id": "welcome"}));
    sms["channel"] = json!("SMS");
    assert_eq!(detail_fields(&app.create(&sms).await.1), ["template.id"]);
    let mut literal = templated("k", json!({"id": "welcome"}));
    literal.as_object_mut().expect("object").remove("template");
    literal["payload"] =
        json!({"$template": {"id": "welcome", "version": 1, "locale": "en"}, "data": {}});
    assert_eq!(detail_fields(&app.create(&literal).await.1), ["payload"]);
    literal["payload"] = json!({"subject": "x"});
    literal["locale"] = json!("en");
    assert_eq!(detail_fields(&app.create(&literal).await.1), ["locale"]);

    // In a batch each item answers for itself.
    let (status, batch) = app
        .create_batch(&json!({"notifications": [
            templated("b-1", json!({"id": "welcome", "data": {"name": "A"}})),
            templated("b-2", json!({"id": "nothing"})),
        ]}))
        .await;
    assert_eq!(status, 200, "{batch}");
    assert_eq!(batch["results"][0]["status"], 201);
    assert_eq!(batch["results"][1]["status"], 400);
    assert_eq!(batch["results"][1]["errors"][0]["field"], "template.id");
    let (_, created) = app
        .get(batch["results"][0]["id"].as_str().expect("id"))
        .await;
    assert_eq!(created["template"], json!({"id": "welcome", "version": 1}));
}
