//! `GET /console`: the operator console, one self-contained page compiled in (no build
//! step, nothing fetched from elsewhere). Its CSP allows exactly its one inline script and
//! its one inline style, by hash; the page has no inline event handlers and talks only to
//! this API, with the operator key it keeps in `sessionStorage`.

use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};

pub const CONSOLE_HTML: &str = include_str!("console.html");

/// The text between the first `<tag>` and its closing tag.
fn inline(tag: &str) -> &'static str {
    CONSOLE_HTML
        .split_once(&format!("<{tag}>"))
        .and_then(|(_, rest)| rest.split_once(&format!("</{tag}>")))
        .map_or("", |(text, _)| text)
}

fn hash(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes()))
}

/// The page's CSP: its script and its style by hash, requests to this origin only.
pub fn console_csp() -> String {
    format!(
        "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-{}'; \
         connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'",
        hash(inline("script")),
        hash(inline("style"))
    )
}

pub async fn page() -> Response {
    let mut response = Html(CONSOLE_HTML).into_response();
    let headers = response.headers_mut();
    if let Ok(csp) = HeaderValue::from_str(&console_csp()) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    // The key never travels in a URL, and the page is not cached with anything in it.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One script, one style, no inline handlers, no external resource: what the CSP
    /// allows is exactly what the page holds.
    #[test]
    fn the_page_is_self_contained_and_the_csp_names_its_hashes() {
        assert_eq!(CONSOLE_HTML.matches("<script").count(), 1);
        assert_eq!(CONSOLE_HTML.matches("<style").count(), 1);
        assert!(!inline("script").is_empty() && !inline("style").is_empty());
        let lower = CONSOLE_HTML.to_ascii_lowercase();
        for forbidden in [
            " onclick=",
            " onload=",
            " onchange=",
            " onsubmit=",
            " oninput=",
            "http://",
            "https://",
            " style=",
            "javascript:",
            "innerhtml",
        ] {
            assert!(
                !lower.contains(forbidden),
                "the page contains {forbidden:?}"
            );
        }
        let csp = console_csp();
        assert!(csp.contains(&hash(inline("script"))) && csp.contains(&hash(inline("style"))));
        assert!(!csp.contains("unsafe"));
    }
}
