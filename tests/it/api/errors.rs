//! Errors: every failing field at once, one envelope for every error, clean answers to
//! malformed and hostile input, request ids and security headers.

use base64::Engine;
use notify_tests::TestApp;
use notify_tests::app::{assert_envelope, detail_fields, details};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::body;

#[tokio::test]
async fn several_invalid_fields_are_reported_together() {
    let app = TestApp::spawn().await;
    let (status, error) = app
        .create(
            &json!({"recipient": "x\u{0}y", "channel": "FAX", "payload": {"k\u{0}": "v"}, "priority": "URGENT",
                    "idempotencyKey": "", "delaySeconds": 0, "colour": "red"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_envelope(&error, 400, "/notifications");
    assert_eq!(error["message"], "Validation failed");
    let fields = detail_fields(&error);
    for field in [
        "colour",
        "recipient",
        "channel",
        "payload",
        "priority",
        "idempotencyKey",
        "delaySeconds",
    ] {
        assert!(
            fields.iter().any(|f| f == field),
            "{field} not reported: {error}"
        );
    }
    assert!(
        details(&error)
            .iter()
            .any(|(f, e)| f == "colour" && e == &["property colour should not exist"])
    );
}

/// One wording for a bad recipient, whichever route reads it.
#[tokio::test]
async fn a_bad_recipient_reads_the_same_on_create_list_and_bulk_retry() {
    let app = TestApp::spawn().await;
    let too_long = format!("{}@example.com", "a".repeat(320));
    let length = "recipient must be between 1 and 320 characters";
    let nul = "recipient must not contain NUL (\\u0000) characters";
    for (recipient, query, expected) in [
        ("", "", vec![length]),
        (too_long.as_str(), too_long.as_str(), vec![length]),
        ("a\u{0}b", "a%00b", vec![nul]),
    ] {
        let mut create = body("bad-recipient");
        create["recipient"] = json!(recipient);
        let (status, created) = app.create(&create).await;
        let (_, listed) = app.list(&format!("recipient={query}")).await;
        let (_, redriven) = app.retry_bulk(&json!({"recipient": recipient})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{created}");
        for error in [&created, &listed, &redriven] {
            assert_eq!(error["statusCode"], 400, "{recipient:?}: {error}");
            let recipient_errors: Vec<_> = details(error)
                .into_iter()
                .filter(|(field, _)| field == "recipient")
                .flat_map(|(_, errors)| errors)
                .collect();
            assert_eq!(recipient_errors, expected, "{recipient:?}: {error}");
        }
    }
}

#[tokio::test]
async fn null_schedule_fields_are_400_never_500() {
    let app = TestApp::spawn().await;
    for field in ["delaySeconds", "sendAt"] {
        let mut request = body(&format!("null-{field}"));
        request
            .as_object_mut()
            .expect("object")
            .remove("delaySeconds");
        request[field] = Value::Null;
        let (status, error) = app.create(&request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}: {error}");
    }
    let mut neither = body("neither");
    neither
        .as_object_mut()
        .expect("object")
        .remove("delaySeconds");
    let (status, error) = app.create(&neither).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        details(&error),
        [(
            "sendAt".to_string(),
            vec!["Provide exactly one of sendAt or delaySeconds".to_string()]
        )]
    );
}

#[tokio::test]
async fn malformed_and_oversized_bodies_get_clean_errors() {
    let app = TestApp::spawn().await;

    let truncated = app
        .request(Method::POST, "/notifications")
        .header("content-type", "application/json")
        .body(r#"{"recipient": "a@b.c", "chan"#)
        .send()
        .await
        .expect("request");
    assert_eq!(truncated.status(), StatusCode::BAD_REQUEST);
    let text = truncated.text().await.expect("text");
    let error: Value = serde_json::from_str(&text).expect("envelope");
    assert_envelope(&error, 400, "/notifications");
    for leak in ["panicked", "src/", "backtrace", "serde"] {
        assert!(!text.contains(leak), "{leak} leaked: {text}");
    }

    // Two members of one name: which one a reader takes is up to it, so none is taken.
    let twice = app
        .request(Method::POST, "/notifications")
        .header("content-type", "application/json")
        .body(
            r#"{"recipient":"a@example.com","channel":"email","delaySeconds":0,
                "payload":{"subject":"s"},"recipient":"b@example.com"}"#,
        )
        .send()
        .await
        .expect("request");
    assert_eq!(twice.status(), StatusCode::BAD_REQUEST);
    let error: Value = twice.json().await.expect("envelope");
    assert_envelope(&error, 400, "/notifications");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("duplicate member \"recipient\"")),
        "{error}"
    );
    assert_eq!(
        app.db.count("SELECT count(*) FROM notifications").await,
        0,
        "nothing stored"
    );

    let mut big = body("big");
    big["payload"] = json!({"blob": "x".repeat(70 * 1024)});
    let (status, error) = app.create(&big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_envelope(&error, 413, "/notifications");

    let form = app
        .send(
            app.request(Method::POST, "/notifications")
                .body("recipient=a")
                .header("content-type", "text/plain"),
        )
        .await;
    assert_eq!(form.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    for other in ["application/vnd.api+json", "application/json-patch+json"] {
        let reply = app
            .send(
                app.request(Method::POST, "/notifications")
                    .body(body("typed").to_string())
                    .header("content-type", other),
            )
            .await;
        assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{other}");
    }
    let charset = app
        .send(
            app.request(Method::POST, "/notifications")
                .body(body("charset").to_string())
                .header("content-type", "Application/JSON; charset=utf-8"),
        )
        .await;
    assert_eq!(charset.status, StatusCode::CREATED);
}

#[tokio::test]
async fn request_ids_are_kept_when_safe_and_replaced_otherwise() {
    let app = TestApp::spawn().await;
    let kept = app
        .send(
            app.request(Method::GET, "/health")
                .header("x-request-id", "trace-1.2:3_4"),
        )
        .await;
    assert_eq!(kept.headers["x-request-id"], "trace-1.2:3_4");
    for unsafe_id in ["has space", "<script>", &"a".repeat(129)] {
        let reply = app
            .send(
                app.request(Method::GET, "/notifications/nope")
                    .header("x-request-id", unsafe_id),
            )
            .await;
        let echoed = reply.headers["x-request-id"]
            .to_str()
            .expect("ascii")
            .to_string();
        assert_ne!(echoed, unsafe_id);
        assert!(uuid::Uuid::try_parse(&echoed).is_ok(), "{echoed}");
        assert_eq!(reply.body["requestId"], echoed.as_str());
    }
}

#[tokio::test]
async fn every_response_carries_the_security_headers_and_no_server_banner() {
    let app = TestApp::spawn().await;
    for path in [
        "/health",
        "/notifications",
        "/missing",
        "/api/docs-json",
        "/api/docs",
    ] {
        let reply = app.send(app.request(Method::GET, path)).await;
        let headers = &reply.headers;
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["x-frame-options"], "SAMEORIGIN", "{path}");
        assert!(headers.get("server").is_none(), "{path}");
        assert!(headers.get("content-security-policy").is_some(), "{path}");
    }
    let missing = app.send(app.request(Method::GET, "/missing")).await;
    assert_envelope(&missing.body, 404, "/missing");
    let docs = app.send(app.request(Method::GET, "/api/docs-json")).await;
    assert_eq!(docs.body["info"]["title"], "Notify Queue API");
}

/// A sweep of hostile inputs: whatever a client sends, the answer is never a 5xx.
#[tokio::test]
async fn no_client_input_produces_a_server_error() {
    let app = TestApp::spawn().await;
    let bodies: Vec<String> = vec![
        "".into(), "null".into(), "[]".into(), "42".into(), "\"text\"".into(), "{".into(), "{}".into(),
        r#"{"recipient": "\ud800"}"#.into(), r#"{"payload": {"n": 1e999}}"#.into(),
        format!("{}{}", "[".repeat(200), "]".repeat(200)),
        format!(r#"{{"recipient":"a","channel":"SMS","priority":"LOW","idempotencyKey":"deep","delaySeconds":5,"payload":{}1{}}}"#, r#"{"a":"#.repeat(100), "}".repeat(100)),
        r#"{"recipient":"a","channel":"SMS","priority":"LOW","idempotencyKey":"big","delaySeconds":9223372036854775808,"payload":{}}"#.into(),
        r#"{"recipient":"a","channel":"SMS","priority":"LOW","idempotencyKey":"far","sendAt":"+275760-09-13T00:00:00Z","payload":{}}"#.into(),
        r#"{"recipient":"a","channel":"SMS","priority":"LOW","idempotencyKey":"neg","sendAt":"0000-01-01T00:00:00Z","payload":{}}"#.into(),
        r#"{"recipient":"a","channel":"SMS","priority":"LOW","idempotencyKey":"nul","delaySeconds":5,"payload":{"x":"\u0000"}}"#.into(),
    ];
    for body in &bodies {
        let reply = app
            .send(
                app.request(Method::POST, "/notifications")
                    .header("content-type", "application/json")
                    .body(body.clone()),
            )
            .await;
        assert!(
            reply.status.is_client_error() || reply.status.is_success(),
            "{} for {body:.80}",
            reply.status
        );
    }
    for path in [
        "/notifications/%00",
        "/notifications/..%2F..",
        "/notifications?status=%FF",
        "/notifications?cursor=%00",
        "/notifications?limit=-1",
        "/notifications?recipient=",
    ] {
        let reply = app.send(app.request(Method::GET, path)).await;
        assert!(
            reply.status.is_client_error() || reply.status.is_success(),
            "{} for {path}",
            reply.status
        );
    }
    // A cursor of every listing, well formed but for a time before year 1: chrono holds
    // it, PostgreSQL cannot compare with it.
    let ancient = |rest: &str| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(format!("-300000000000000000:{rest}"))
    };
    let id = "8828acc0-68d2-48c6-bb05-f03066a1549c";
    for (route, rest) in [
        ("/notifications", id.to_string()),
        ("/webhook-events", id.to_string()),
        ("/campaigns", id.to_string()),
        ("/templates", "welcome".to_string()),
        ("/suppressions", format!("EMAIL:{}", "a".repeat(64))),
    ] {
        let path = format!("{route}?cursor={}", ancient(&rest));
        let reply = app.send(app.request(Method::GET, &path)).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{path}: {}",
            reply.body
        );
    }
    let reply = app.send(app.request(Method::PUT, "/notifications")).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
}

/// The contract allows `Z` or `±HH:MM` only; `+0100` and `+01` are refused with the
/// offset message.
#[tokio::test]
async fn a_send_at_offset_without_a_colon_is_refused() {
    let app = TestApp::spawn().await;
    for send_at in ["2030-01-01T09:30:00+0100", "2030-01-01T09:30:00+01"] {
        let (status, error) = app
            .create(
                &json!({"recipient": "a@example.com", "channel": "EMAIL", "payload": {},
                            "priority": "LOW", "idempotencyKey": send_at, "sendAt": send_at}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{send_at}");
        assert_eq!(
            details(&error),
            [(
                "sendAt".to_string(),
                vec!["sendAt must include a timezone offset (Z or ±HH:MM)".to_string()]
            )]
        );
    }
}

/// `delaySeconds` out of range says so, however large the number is written; only what
/// is not a whole number is "not an integer".
#[tokio::test]
async fn delay_seconds_out_of_range_says_so_however_large() {
    let app = TestApp::spawn().await;
    let range = "delaySeconds must be between 1 and 31536000";
    let integer = "delaySeconds must be an integer";
    for (delay, expected) in [
        ("0", range),
        ("31536001", range),
        ("99999999999999999999999", range),
        ("1e30", range),
        ("-1e30", range),
        ("1.5", integer),
        ("\"60\"", integer),
    ] {
        let text = format!(
            r#"{{"recipient":"a@example.com","channel":"EMAIL","priority":"NORMAL","idempotencyKey":"d","payload":{{}},"delaySeconds":{delay}}}"#
        );
        let reply = app
            .send(
                app.request(Method::POST, "/notifications")
                    .header("content-type", "application/json")
                    .body(text),
            )
            .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{delay}");
        assert_eq!(
            details(&reply.body),
            [("delaySeconds".to_string(), vec![expected.to_string()])],
            "{delay}"
        );
    }
}

/// A route that reads no body refuses one with properties, as a route that reads a body
/// refuses a property it does not know, and does nothing; no body and `{}` are taken.
#[tokio::test]
async fn a_route_that_reads_no_body_refuses_a_property_and_does_nothing() {
    let app = TestApp::spawn().await;
    let (_, created) = app.create(&body("no-body")).await;
    let id = created["id"].as_str().expect("id").to_string();
    let path = format!("/notifications/{id}");
    for (sent, expected) in [
        (json!({"reason": "duplicate"}), "reason"),
        (json!([]), "body"),
        (json!("cancel"), "body"),
    ] {
        let reply = app
            .send(app.request(Method::DELETE, &path).json(&sent))
            .await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{sent}: {}",
            reply.body
        );
        assert_envelope(&reply.body, 400, &path);
        assert_eq!(detail_fields(&reply.body), [expected], "{sent}");
    }
    let refused = app
        .send(
            app.request(Method::DELETE, &path)
                .header("content-type", "text/plain")
                .body("please"),
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (_, unchanged) = app.get(&id).await;
    assert_eq!(
        unchanged["status"], "PENDING",
        "the refused cancels did nothing"
    );
    let reply = app
        .send(app.request(Method::DELETE, &path).json(&json!({})))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["status"], "CANCELLED");

    // A secret of the caller's choosing is not taken as one: nothing rotates.
    let (status, endpoint) = app
        .send(
            app.request(Method::POST, "/webhook-endpoints")
                .json(&json!({"url": "https://hooks.invalid/notify"})),
        )
        .await
        .pair();
    assert_eq!(status, StatusCode::CREATED, "{endpoint}");
    let rotate = format!(
        "/webhook-endpoints/{}/rotate-secret",
        endpoint["id"].as_str().expect("id")
    );
    let reply = app
        .send(
            app.request(Method::POST, &rotate)
                .json(&json!({"secret": "whsec_mine"})),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    assert_eq!(detail_fields(&reply.body), ["secret"]);
    let (_, listed) = app
        .send(app.request(Method::GET, "/webhook-endpoints"))
        .await
        .pair();
    assert!(
        listed["items"][0].get("previousSecretValidUntil").is_none(),
        "rotated: {listed}"
    );
    let reply = app.send(app.request(Method::POST, &rotate)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}
