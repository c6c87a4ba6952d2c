//! The audience routes over HTTP: recipient profiles, preferences and the suppression
//! list; the audience fields of `POST /notifications` in [`intake`].

mod intake;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use notify_shared::auth::Scope;
use notify_tests::TestApp;
use notify_tests::app::detail_fields;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{call, key};

fn time(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(value.as_str().unwrap_or_else(|| panic!("a time: {value}")))
        .expect("ISO time")
        .with_timezone(&Utc)
}

async fn put(app: &TestApp, id: &str, key: Option<&str>, body: Value) -> (StatusCode, Value) {
    call(
        app,
        Method::PUT,
        &format!("/recipients/{id}"),
        key,
        Some(&body),
    )
    .await
    .pair()
}

async fn get(app: &TestApp, path: &str, key: Option<&str>) -> (StatusCode, Value) {
    call(app, Method::GET, path, key, None).await.pair()
}

async fn patch(app: &TestApp, id: &str, body: Value) -> (StatusCode, Value) {
    let path = format!("/recipients/{id}/preferences");
    call(app, Method::PATCH, &path, None, Some(&body))
        .await
        .pair()
}

async fn suppress(app: &TestApp, channel: &str, address: &str) -> (StatusCode, Value) {
    let body = json!({"channel": channel, "address": address, "reason": "MANUAL"});
    call(app, Method::POST, "/suppressions", None, Some(&body))
        .await
        .pair()
}

#[tokio::test]
async fn a_profile_is_created_replaced_and_read_back() {
    let app = TestApp::spawn().await;
    let (status, first) = put(
        &app,
        "ada-1",
        None,
        json!({"email": "ada@example.com", "phone": "+15551234567", "pushTokens": ["tok-a"],
               "quietHours": {"start": "22:00", "end": "08:00"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let expected = json!({"recipientId": "ada-1", "email": "ada@example.com",
        "phone": "+15551234567", "pushTokens": ["tok-a"], "timezone": "UTC", "locale": "en",
        "quietHours": {"start": "22:00", "end": "08:00"}, "unsubscribedAll": false,
        "createdAt": first["createdAt"], "updatedAt": first["updatedAt"]});
    assert_eq!(first, expected);
    assert_eq!(
        get(&app, "/recipients/ada-1", None).await,
        (StatusCode::OK, first.clone())
    );

    // A replacement, not a merge: what is left out is gone.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let (status, second) = put(
        &app,
        "ada-1",
        None,
        json!({"email": "ada@new.example", "timezone": "Europe/Paris", "locale": "fr"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["phone"], Value::Null, "{second}");
    assert_eq!(second["pushTokens"], json!([]), "{second}");
    assert_eq!(second["quietHours"], Value::Null, "{second}");
    assert_eq!(
        (&second["timezone"], &second["locale"]),
        (&json!("Europe/Paris"), &json!("fr"))
    );
    assert_eq!(second["createdAt"], first["createdAt"]);
    assert!(
        time(&second["updatedAt"]) > time(&first["updatedAt"]),
        "{first} {second}"
    );
    assert_eq!(
        get(&app, "/recipients/ada-1", None).await,
        (StatusCode::OK, second)
    );
    assert_eq!(
        get(&app, "/recipients/nobody", None).await.0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn invalid_profiles_name_each_field_and_store_nothing() {
    let app = TestApp::spawn().await;
    let tokens: Vec<String> = (0..9).map(|i| format!("token-{i}")).collect();
    let (status, error) = put(
        &app,
        "ada-2",
        None,
        json!({"timezone": "Mars/Olympus", "phone": "555", "pushTokens": tokens,
               "quietHours": {"start": "22:00", "end": "25:00"}, "nickname": "ada"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    let fields = detail_fields(&error);
    for field in [
        "timezone",
        "phone",
        "quietHours.end",
        "pushTokens",
        "nickname",
    ] {
        assert!(
            fields.iter().any(|f| f == field),
            "{field} not named: {error}"
        );
    }
    assert_eq!(
        get(&app, "/recipients/ada-2", None).await.0,
        StatusCode::NOT_FOUND
    );

    let (status, error) = put(&app, "ada!2", None, json!({})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(detail_fields(&error), ["recipientId"]);
}

#[tokio::test]
async fn a_push_token_is_held_to_the_length_of_a_recipient_so_every_profile_can_be_sent_to() {
    let app = TestApp::spawn().await;
    let (status, error) = put(&app, "long", None, json!({"pushTokens": ["t".repeat(321)]})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(detail_fields(&error), ["pushTokens"]);

    let token = "t".repeat(320);
    let (status, body) = put(&app, "longest", None, json!({"pushTokens": [token]})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, created) = app
        .create(
            &json!({"recipientId": "longest", "channel": "PUSH", "priority": "NORMAL",
                        "idempotencyKey": "push-longest", "payload": {"title": "t"},
                        "delaySeconds": 60}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["recipient"], token.as_str(), "{created}");
}

#[tokio::test]
async fn each_client_key_sees_only_its_own_recipients() {
    let app = TestApp::spawn_with_keys().await;
    let a = key(&app, "client-a", Scope::Client).await;
    let b = key(&app, "client-b", Scope::Client).await;
    for (key, email) in [(&a, "a@example.com"), (&b, "b@example.com")] {
        let (status, body) = put(&app, "same-id", Some(key), json!({"email": email})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    for (key, email) in [(&a, "a@example.com"), (&b, "b@example.com")] {
        let (status, body) = get(&app, "/recipients/same-id", Some(key)).await;
        assert_eq!((status, &body["email"]), (StatusCode::OK, &json!(email)));
    }
    assert_eq!(
        put(&app, "only-a", Some(&a), json!({})).await.0,
        StatusCode::OK
    );
    for path in ["/recipients/only-a", "/recipients/only-a/preferences"] {
        assert_eq!(
            get(&app, path, Some(&b)).await.0,
            StatusCode::NOT_FOUND,
            "{path}"
        );
        assert_eq!(get(&app, path, Some(&a)).await.0, StatusCode::OK, "{path}");
    }
}

/// Operators see every key's recipients: a profile only one client holds is read,
/// changed and erased through an operator key; an id several clients use is a 409; an id
/// the operator holds itself is its own.
#[tokio::test]
async fn an_operator_reaches_a_clients_recipient_and_is_told_when_the_id_is_ambiguous() {
    let app = TestApp::spawn_with_keys().await;
    let a = key(&app, "client-a", Scope::Client).await;
    let b = key(&app, "client-b", Scope::Client).await;
    let operator = key(&app, "ops", Scope::Operator).await;
    put(&app, "only-a", Some(&a), json!({"email": "a@example.com"})).await;
    let (status, body) = get(&app, "/recipients/only-a", Some(&operator)).await;
    assert_eq!(
        (status, &body["email"]),
        (StatusCode::OK, &json!("a@example.com"))
    );
    let (status, body) = call(
        &app,
        Method::PATCH,
        "/recipients/only-a/preferences",
        Some(&operator),
        Some(&json!({"categories": {"news": {"EMAIL": false}}})),
    )
    .await
    .pair();
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, seen_by_a) = get(&app, "/recipients/only-a/preferences", Some(&a)).await;
    assert_eq!(seen_by_a["categories"]["news"]["EMAIL"], false);

    for (key, email) in [(&a, "a2@example.com"), (&b, "b2@example.com")] {
        put(&app, "shared-id", Some(key), json!({"email": email})).await;
    }
    let (status, body) = get(&app, "/recipients/shared-id", Some(&operator)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // An id the operator has a profile of means its own, whoever else holds one.
    put(
        &app,
        "ops-id",
        Some(&operator),
        json!({"email": "ops@example.com"}),
    )
    .await;
    put(&app, "ops-id", Some(&a), json!({"email": "a3@example.com"})).await;
    let (status, body) = get(&app, "/recipients/ops-id", Some(&operator)).await;
    assert_eq!(
        (status, &body["email"]),
        (StatusCode::OK, &json!("ops@example.com"))
    );

    let erased = call(
        &app,
        Method::DELETE,
        "/recipients/only-a",
        Some(&operator),
        None,
    )
    .await;
    assert_eq!(erased.status, StatusCode::NO_CONTENT);
    assert_eq!(
        get(&app, "/recipients/only-a", Some(&a)).await.0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn preferences_merge_per_category_and_channel() {
    let app = TestApp::spawn().await;
    assert_eq!(put(&app, "ada-3", None, json!({})).await.0, StatusCode::OK);
    let path = "/recipients/ada-3/preferences";
    assert_eq!(
        get(&app, path, None).await,
        (StatusCode::OK, json!({"categories": {}}))
    );

    let (status, body) = patch(
        &app,
        "ada-3",
        json!({"categories": {"news": {"EMAIL": false}}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = patch(
        &app,
        "ada-3",
        json!({"categories": {"promo": {"SMS": false}}}),
    )
    .await;
    let merged = json!({"categories": {
        "news": {"EMAIL": false, "SMS": true, "PUSH": true},
        "promo": {"EMAIL": true, "SMS": false, "PUSH": true}}});
    assert_eq!((status, &body), (StatusCode::OK, &merged));
    assert_eq!(
        get(&app, path, None).await,
        (StatusCode::OK, merged.clone())
    );

    let valid = json!({"categories": {"news": {"EMAIL": true}}});
    assert_eq!(patch(&app, "nobody", valid).await.0, StatusCode::NOT_FOUND);
    let (status, error) = patch(
        &app,
        "ada-3",
        json!({"categories": {"News": {"EMAIL": true}, "news": {"FAX": true, "SMS": "no"}}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    let fields = detail_fields(&error);
    for field in [
        "categories.News",
        "categories.news.FAX",
        "categories.news.SMS",
    ] {
        assert!(
            fields.iter().any(|f| f == field),
            "{field} not named: {error}"
        );
    }
    assert_eq!(
        get(&app, path, None).await,
        (StatusCode::OK, merged),
        "nothing merged"
    );
}

#[tokio::test]
async fn a_suppressed_address_is_listed_once_found_and_removed() {
    let app = TestApp::spawn().await;
    let (status, created) = suppress(&app, "EMAIL", "Ada@Example.com").await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        (&created["channel"], &created["reason"]),
        (&json!("EMAIL"), &json!("MANUAL"))
    );
    // Email compares case-insensitively: the same address, listed already.
    let (status, again) = suppress(&app, "EMAIL", "ada@example.com").await;
    assert_eq!((status, &again), (StatusCode::OK, &created));

    let found = "/suppressions?channel=EMAIL&address=ada@example.com";
    let (status, page) = get(&app, found, None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page, json!({"items": [created], "nextCursor": null}));
    // Without a channel, the address is looked for on every channel. A channel the
    // simulated provider sends takes any address, as intake takes any recipient for it.
    let (status, on_sms) = suppress(&app, "SMS", "ada@example.com").await;
    assert_eq!(status, StatusCode::CREATED, "{on_sms}");
    let (status, other) = suppress(&app, "SMS", "user-42").await;
    assert_eq!(status, StatusCode::CREATED, "{other}");
    let (status, page) = get(&app, "/suppressions?address=ada@example.com", None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(
        page,
        json!({"items": [on_sms.clone(), created.clone()], "nextCursor": null})
    );
    let status = call(
        &app,
        Method::DELETE,
        "/suppressions/SMS/ada@example.com",
        None,
        None,
    )
    .await
    .status;
    assert_eq!(status, StatusCode::NO_CONTENT);

    let remove = "/suppressions/EMAIL/ada@example.com";
    let status = call(&app, Method::DELETE, remove, None, None).await.status;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let status = call(&app, Method::DELETE, remove, None, None).await.status;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(get(&app, found, None).await.1["items"], json!([]));
}

/// Where a real provider sends the channel, an address it could not take is refused, as
/// intake refuses such a recipient there; the other channels take any address.
#[tokio::test]
async fn a_suppression_on_a_real_providers_channel_must_be_an_address_it_takes() {
    let config = notify_shared::config::Config::from_vars(
        [
            ("EMAIL_PROVIDER", "ses"),
            ("SES_FROM_ADDRESS", "sender@example.com"),
            ("AWS_REGION", "us-east-1"),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect(),
    )
    .expect("configuration");
    let app = TestApp::spawn_with_keys_and_config(config).await;
    let operator = key(&app, "ops", Scope::Operator).await;
    for (channel, address, refused) in [
        ("EMAIL", "not-an-address", true),
        ("EMAIL", "ada@example.com", false),
        ("SMS", "not-a-number", false),
    ] {
        let body = json!({"channel": channel, "address": address});
        let (status, reply) = call(
            &app,
            Method::POST,
            "/suppressions",
            Some(&operator),
            Some(&body),
        )
        .await
        .pair();
        if refused {
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
            assert_eq!(detail_fields(&reply), ["address"]);
        } else {
            assert_eq!(status, StatusCode::CREATED, "{body}: {reply}");
        }
    }
}

#[tokio::test]
async fn suppression_pages_return_every_entry_once_newest_first() {
    let app = TestApp::spawn().await;
    let mut added = Vec::new();
    for i in 0..5 {
        let (status, entry) = suppress(&app, "SMS", &format!("+1555000000{i}")).await;
        assert_eq!(status, StatusCode::CREATED, "{entry}");
        added.push(entry["address"].clone());
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..5 {
        let path = match &cursor {
            Some(c) => format!("/suppressions?limit=2&cursor={c}"),
            None => "/suppressions?limit=2".to_string(),
        };
        let (status, page) = get(&app, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let items = page["items"].as_array().expect("items");
        assert!(items.len() <= 2, "{page}");
        seen.extend(items.iter().map(|e| e["address"].clone()));
        cursor = page["nextCursor"].as_str().map(String::from);
        if cursor.is_none() {
            break;
        }
    }
    added.reverse();
    assert_eq!(seen, added, "each once, newest first");

    let crafted = [
        "bm90LWEtY3Vyc29y".to_string(),
        URL_SAFE_NO_PAD.encode(format!("1:SMS:{}", "z".repeat(64))),
    ];
    for cursor in crafted {
        let (status, error) = get(&app, &format!("/suppressions?cursor={cursor}"), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{cursor}: {error}");
        assert_eq!(detail_fields(&error), ["cursor"]);
    }
}

#[tokio::test]
async fn the_suppression_list_is_for_operators_only() {
    let app = TestApp::spawn_with_keys().await;
    let client = key(&app, "client", Scope::Client).await;
    let operator = key(&app, "ops", Scope::Operator).await;
    let body = json!({"channel": "EMAIL", "address": "ada@example.com"});
    let routes = [
        (Method::GET, "/suppressions", None),
        (Method::POST, "/suppressions", Some(&body)),
        (Method::DELETE, "/suppressions/EMAIL/ada@example.com", None),
    ];
    for (method, path, body) in routes {
        let reply = call(&app, method.clone(), path, Some(&client), body).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{method} {path}");
    }
    let (status, page) = get(&app, "/suppressions", Some(&operator)).await;
    assert_eq!(
        (status, page),
        (StatusCode::OK, json!({"items": [], "nextCursor": null}))
    );
}
