//! What a request carries: exactly the five body fields, the event id header, and a
//! Standard Webhooks v1 signature that an independent verifier (not the crate's signing
//! code) accepts.

use std::collections::{HashMap, HashSet};

use axum::http::HeaderMap;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use notify_shared::config::Config;
use notify_shared::webhook::WebhookDrainer;
use notify_tests::receiver::{Receiver, Reply};
use notify_tests::{TestDb, factory, worker};
use sha2::Sha256;
use uuid::Uuid;

use super::insert_event;

// An independent Standard Webhooks v1 verifier.

const TOLERANCE_SECONDS: i64 = 5 * 60;

pub(super) fn verify(
    secret: &str,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<(), String> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .ok_or(format!("missing {name}"))
    };
    let id = header("webhook-id")?;
    let timestamp_text = header("webhook-timestamp")?;
    let signatures = header("webhook-signature")?;
    let timestamp: i64 = timestamp_text
        .parse()
        .map_err(|_| "bad timestamp".to_string())?;
    if (now - timestamp).abs() > TOLERANCE_SECONDS {
        return Err("timestamp outside tolerance".to_string());
    }
    let key = match secret.strip_prefix("whsec_") {
        Some(encoded) => STANDARD.decode(encoded).map_err(|e| e.to_string())?,
        None => secret.as_bytes().to_vec(),
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|e| e.to_string())?;
    let mut signed = format!("{id}.{timestamp_text}.").into_bytes();
    signed.extend_from_slice(body);
    mac.update(&signed);
    let expected = mac.finalize().into_bytes();
    let matched = signatures
        .split(' ')
        .filter_map(|candidate| candidate.split_once(','))
        .filter(|(version, _)| *version == "v1")
        .filter_map(|(_, encoded)| STANDARD.decode(encoded).ok())
        .any(|given| constant_time_eq(&given, &expected));
    if matched {
        Ok(())
    } else {
        Err("no matching signature".to_string())
    }
}

/// Compares without stopping at the first difference, so timing reveals nothing.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[tokio::test]
async fn the_body_has_the_five_fields_of_the_design_and_its_type_and_the_event_id_header_matches() {
    let db = TestDb::new().await;
    let receiver = Receiver::start(&[], Reply::Status(204)).await;
    let drainer = worker::drainer(&db.pool, &receiver.url, 10).build();
    let notification = factory::create(&db.pool, factory::Spec::default()).await;
    let occurred_at: DateTime<Utc> = "2026-01-02T03:04:05.678Z".parse().expect("time");
    let event =
        factory::insert_event(&db.pool, notification.id, "DEAD_LETTERED", 6, occurred_at).await;

    assert_eq!(
        worker::drain(&drainer).await.delivered,
        1,
        "204 counts as delivered"
    );
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    let body = request.json();
    let fields: HashSet<&str> = body
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        fields,
        HashSet::from([
            "eventId",
            "type",
            "jobId",
            "status",
            "attemptCount",
            "timestamp"
        ])
    );
    assert_eq!(body["type"], "notification.dead_lettered");
    assert_eq!(body["eventId"], event.to_string());
    assert_eq!(body["jobId"], notification.id.to_string());
    assert_eq!(body["status"], "DEAD_LETTERED");
    assert_eq!(body["attemptCount"], 6);
    assert_eq!(body["timestamp"], "2026-01-02T03:04:05.678Z");
    assert_eq!(
        request.header("x-webhook-event-id"),
        Some(event.to_string().as_str())
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert!(
        request.header("webhook-signature").is_none(),
        "no secret, no signature"
    );
}

#[tokio::test]
async fn signed_requests_pass_an_independent_standard_webhooks_check() {
    let db = TestDb::new().await;
    let receiver = Receiver::start(&[], Reply::Status(200)).await;
    let secret = format!("whsec_{}", STANDARD.encode(Uuid::new_v4().as_bytes()));
    // Configured as an operator would: WEBHOOK_SECRET in the whsec_ form, decoded by the
    // configuration.
    let config = Config::from_vars(HashMap::from([
        ("WEBHOOK_URL".to_string(), receiver.url.clone()),
        ("WEBHOOK_SECRET".to_string(), secret.clone()),
    ]))
    .expect("configuration");
    let drainer = WebhookDrainer::from_config(&db.pool, &config).expect("drainer");
    let notification = factory::create(&db.pool, factory::Spec::default()).await;
    let event = insert_event(&db.pool, &notification, "SENT").await;

    assert_eq!(worker::drain(&drainer).await.delivered, 1);
    let request = receiver.received().remove(0);
    assert_eq!(
        request.header("webhook-id"),
        Some(event.to_string().as_str())
    );
    let sent_at: i64 = request
        .header("webhook-timestamp")
        .expect("timestamp header")
        .parse()
        .expect("unix seconds");
    let now = Utc::now().timestamp();
    assert!((now - sent_at).abs() <= 5, "signed at send time");
    assert!(
        request
            .header("webhook-signature")
            .is_some_and(|s| s.starts_with("v1,")),
        "{:?}",
        request.headers
    );

    assert_eq!(
        verify(&secret, &request.headers, &request.body, now),
        Ok(())
    );

    let tampered = String::from_utf8(request.body.to_vec())
        .expect("utf-8")
        .replace("\"SENT\"", "\"FAILED\"");
    assert_ne!(tampered.as_bytes(), &request.body[..]);
    assert!(verify(&secret, &request.headers, tampered.as_bytes(), now).is_err());

    let outside = TOLERANCE_SECONDS + 1;
    assert_eq!(
        verify(&secret, &request.headers, &request.body, sent_at + outside),
        Err("timestamp outside tolerance".to_string())
    );
    assert!(verify(&secret, &request.headers, &request.body, sent_at - outside).is_err());
    let other_secret = format!("whsec_{}", STANDARD.encode(Uuid::new_v4().as_bytes()));
    assert!(verify(&other_secret, &request.headers, &request.body, now).is_err());

    // Receivers accept any of several space-separated signatures (key rotation).
    let mut rotated = request.headers.clone();
    let real = request.header("webhook-signature").expect("signature");
    rotated.insert(
        "webhook-signature",
        format!("v1,AAAA {real}").parse().expect("header"),
    );
    assert_eq!(verify(&secret, &rotated, &request.body, now), Ok(()));
}
