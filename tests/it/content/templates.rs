//! Publishing, reading and previewing templates over HTTP.

use notify_tests::TestApp;
use notify_tests::app::{assert_envelope, detail_fields, details};
use reqwest::Method;
use serde_json::json;

use super::{call, publish, welcome};

#[tokio::test]
async fn versions_are_numbered_immutable_and_readable() {
    let app = TestApp::spawn().await;
    let first = publish(&app, "welcome", &welcome("Hi")).await;
    assert_eq!(first["version"], 1);
    assert_eq!(first["templateId"], "welcome");
    assert_eq!(first["channel"], "EMAIL");
    assert_eq!(first["locales"], json!(["en", "pt"]));
    let second = publish(&app, "welcome", &welcome("Hello")).await;
    assert_eq!(second["version"], 2);

    let template = call(&app, Method::GET, "/templates/welcome", None).await;
    assert_eq!(template.status, 200);
    assert_eq!(template.body["latest"]["version"], 2);
    assert_eq!(
        template.body["latest"]["locales"]["en"]["subject"],
        "Hello {{ name }}"
    );
    let versions: Vec<i64> = template.body["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| v["version"].as_i64().expect("number"))
        .collect();
    assert_eq!(versions, [1, 2]);
    let one = call(&app, Method::GET, "/templates/welcome/versions/1", None).await;
    assert_eq!(one.status, 200);
    assert_eq!(one.body["locales"]["en"]["subject"], "Hi {{ name }}");

    for path in ["/templates/nothing", "/templates/welcome/versions/3"] {
        let reply = call(&app, Method::GET, path, None).await;
        assert_envelope(&reply.body, 404, path);
    }
    // A template keeps its channel.
    let mut sms = welcome("Hi");
    sms["channel"] = json!("SMS");
    sms["locales"] = json!({"en": {"text": "Hi"}});
    let reply = call(
        &app,
        Method::POST,
        "/templates/welcome/versions",
        Some(&sms),
    )
    .await;
    assert_eq!(reply.status, 409, "{}", reply.body);

    // A version's body is held to the API's 64 KiB like any other.
    let mut large = welcome("Hi");
    large["locales"]["en"]["text"] = json!("x".repeat(65 * 1024));
    let path = "/templates/large/versions";
    let reply = call(&app, Method::POST, path, Some(&large)).await;
    assert_envelope(&reply.body, 413, path);
    let reply = call(&app, Method::GET, "/templates/large", None).await;
    assert_eq!(reply.status, 404, "nothing published");
}

#[tokio::test]
async fn every_locale_must_render_with_the_sample_data() {
    let app = TestApp::spawn().await;
    let mut version = welcome("Hi");
    version["locales"]["pt-BR"] = json!({"subject": "Olá {{ nome }}", "text": "ok"});
    version["locales"]["fr"] = json!({"subject": "Salut", "text": "{% if %}"});
    let reply = call(&app, Method::POST, "/templates/t/versions", Some(&version)).await;
    assert_envelope(&reply.body, 400, "/templates/t/versions");
    assert_eq!(
        detail_fields(&reply.body),
        ["locales.fr.text", "locales.pt-BR.subject"]
    );
    // Nothing was stored.
    let reply = call(&app, Method::GET, "/templates/t", None).await;
    assert_eq!(reply.status, 404);

    // Every failing field of one locale is named, a syntax error beside undefined names.
    let mut version = welcome("Hi");
    version["locales"]["en"] = json!({
        "subject": "{{ nam }}", "text": "{% if %}", "html": "{{ nim }}",
    });
    let reply = call(&app, Method::POST, "/templates/t/versions", Some(&version)).await;
    assert_eq!(
        detail_fields(&reply.body),
        ["locales.en.text", "locales.en.html", "locales.en.subject"]
    );

    let bad = json!({"channel": "PUSH", "defaultLocale": "de", "locales": {"en": {"text": "x"}, "en_US": {}}, "sampleData": [], "extra": 1});
    let reply = call(&app, Method::POST, "/templates/t/versions", Some(&bad)).await;
    assert_eq!(
        detail_fields(&reply.body),
        [
            "extra",
            "sampleData",
            "locales.en.text",
            "locales.en.body",
            "locales.en_US",
            "defaultLocale"
        ]
    );
    let reply = call(
        &app,
        Method::POST,
        "/templates/Bad!/versions",
        Some(&welcome("x")),
    )
    .await;
    assert_eq!(detail_fields(&reply.body), ["templateId"]);
}

#[tokio::test]
async fn sms_versions_record_their_cost_and_refuse_too_many_segments() {
    let app = TestApp::spawn().await;
    let version = json!({
        "channel": "SMS",
        "defaultLocale": "en",
        "locales": {
            "en": {"text": "Your code is {{ code }} €"},
            "ru": {"text": "Ваш код {{ code }}"}
        },
        "sampleData": {"code": "1234"}
    });
    let stored = publish(&app, "code", &version).await;
    assert_eq!(
        stored["sms"],
        json!({
            "en": {"encoding": "GSM-7", "characters": 20, "segments": 1},
            "ru": {"encoding": "UCS-2", "characters": 12, "segments": 1}
        })
    );
    // SMS_MAX_SEGMENTS is 3 by default: 3 × 153 septets pass, one more does not.
    let long = |n: usize| json!({"channel": "SMS", "defaultLocale": "en", "locales": {"en": {"text": "a".repeat(n)}}});
    assert_eq!(
        publish(&app, "long", &long(459)).await["sms"]["en"]["segments"],
        3
    );
    let reply = call(
        &app,
        Method::POST,
        "/templates/long/versions",
        Some(&long(460)),
    )
    .await;
    assert_eq!(reply.status, 400);
    let found = details(&reply.body);
    assert_eq!(found[0].0, "locales.en.text");
    assert!(found[0].1[0].contains("4 segments"), "{found:?}");
    // An SMS that renders to nothing could never be sent.
    let empty = json!({"channel": "SMS", "defaultLocale": "en",
                       "locales": {"en": {"text": "{{ code }}"}}, "sampleData": {"code": ""}});
    let reply = call(
        &app,
        Method::POST,
        "/templates/empty/versions",
        Some(&empty),
    )
    .await;
    assert_eq!(reply.status, 400);
    let found = details(&reply.body);
    assert_eq!(found[0].0, "locales.en.text");
    assert!(found[0].1[0].contains("0 characters"), "{found:?}");
}

#[tokio::test]
async fn preview_renders_without_sending_and_escapes_html_only() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    let reply = call(
        &app,
        Method::POST,
        "/templates/welcome/preview",
        Some(&json!({"locale": "pt-BR", "data": {"name": "<script>x</script>"}})),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["locale"], "pt");
    assert_eq!(reply.body["version"], 1);
    assert_eq!(
        reply.body["rendered"]["text"],
        "Bem-vindo, <script>x</script>"
    );
    let reply = call(
        &app,
        Method::POST,
        "/templates/welcome/preview",
        Some(&json!({"locale": "en", "data": {"name": "<script>x</script>"}})),
    )
    .await;
    assert_eq!(
        reply.body["rendered"]["text"],
        "Welcome, <script>x</script>"
    );
    assert_eq!(
        reply.body["rendered"]["html"],
        "<p>Welcome, &lt;script&gt;x&lt;&#x2f;script&gt;</p>"
    );
    // Strict: a variable missing from the data names every field that uses it.
    let reply = call(
        &app,
        Method::POST,
        "/templates/welcome/preview",
        Some(&json!({"locale": "en", "data": {}})),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        detail_fields(&reply.body),
        ["locales.en.html", "locales.en.subject", "locales.en.text"]
    );
    // The locale and the data are both required, and both are named when both are missing.
    let reply = call(
        &app,
        Method::POST,
        "/templates/welcome/preview",
        Some(&json!({})),
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(
        detail_fields(&reply.body),
        ["locale", "data"],
        "{}",
        reply.body
    );
    let reply = call(
        &app,
        Method::POST,
        "/templates/welcome/preview",
        Some(&json!({"data": {"name": "x"}})),
    )
    .await;
    assert_eq!(detail_fields(&reply.body), ["locale"], "{}", reply.body);
    let count: i64 = app.db.count("SELECT count(*) FROM notifications").await;
    assert_eq!(count, 0);
}

#[tokio::test]
async fn templates_are_listed_newest_first_in_pages_with_their_latest_version() {
    let app = TestApp::spawn().await;
    let listed = call(&app, Method::GET, "/templates", None).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.body, json!({"items": [], "nextCursor": null}));

    publish(&app, "welcome", &welcome("Hi")).await;
    let reminder = json!({
        "channel": "SMS",
        "defaultLocale": "en",
        "locales": {"en": {"text": "Soon, {{ name }}"}, "de": {"text": "Bald, {{ name }}"}},
        "sampleData": {"name": "Ada"}
    });
    publish(&app, "reminder", &reminder).await;
    // A new version does not move a template in the order.
    publish(&app, "welcome", &welcome("Hello")).await;

    let first = call(&app, Method::GET, "/templates?limit=1", None).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let items = first.body["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["templateId"], "reminder");
    assert_eq!(items[0]["channel"], "SMS");
    assert_eq!(items[0]["latestVersion"], 1);
    assert_eq!(items[0]["locales"], json!(["de", "en"]));
    let cursor = first.body["nextCursor"].as_str().expect("a next page");

    let second = call(
        &app,
        Method::GET,
        &format!("/templates?limit=1&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(second.status, 200, "{}", second.body);
    let item = &second.body["items"][0];
    assert_eq!(item["templateId"], "welcome");
    assert_eq!(item["channel"], "EMAIL");
    assert_eq!(item["latestVersion"], 2);
    assert_eq!(item["defaultLocale"], "en");
    assert_eq!(item["locales"], json!(["en", "pt"]));
    assert!(item["updatedAt"].as_str() >= item["createdAt"].as_str());
    assert!(second.body["nextCursor"].is_null());

    let all = call(&app, Method::GET, "/templates", None).await;
    let ids: Vec<&str> = all.body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|t| t["templateId"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["reminder", "welcome"]);

    let bad = call(
        &app,
        Method::GET,
        "/templates?limit=0&cursor=nope&x=1",
        None,
    )
    .await;
    assert_envelope(&bad.body, 400, "/templates");
    assert_eq!(detail_fields(&bad.body), ["x", "limit", "cursor"]);
}

#[tokio::test]
async fn two_spellings_of_one_language_tag_are_refused() {
    let app = TestApp::spawn().await;
    let mut version = welcome("Hi");
    version["locales"]["EN"] = version["locales"]["en"].clone();
    let reply = call(
        &app,
        Method::POST,
        "/templates/welcome/versions",
        Some(&version),
    )
    .await;
    assert_envelope(&reply.body, 400, "/templates/welcome/versions");
    assert_eq!(detail_fields(&reply.body), ["locales.en"], "{}", reply.body);
    let reply = call(&app, Method::GET, "/templates/welcome", None).await;
    assert_eq!(reply.status, 404, "nothing stored: {}", reply.body);
}

/// Tags compare without case, `defaultLocale` too: `EN` names the `en` body, and the
/// version records it as the locales spell it. One that names no body says which exist.
#[tokio::test]
async fn the_default_locale_is_matched_without_case_and_stored_as_the_locales_spell_it() {
    let app = TestApp::spawn().await;
    let mut version = welcome("Hi");
    version["defaultLocale"] = json!("EN");
    let published = publish(&app, "welcome", &version).await;
    assert_eq!(published["defaultLocale"], "en", "{published}");

    version["defaultLocale"] = json!("de");
    let reply = call(
        &app,
        Method::POST,
        "/templates/welcome/versions",
        Some(&version),
    )
    .await;
    assert_envelope(&reply.body, 400, "/templates/welcome/versions");
    let default = details(&reply.body)
        .into_iter()
        .find(|(field, _)| field == "defaultLocale")
        .map(|(_, errors)| errors.join(" "))
        .unwrap_or_default();
    assert!(default.contains("(en, pt)"), "{}", reply.body);
}
