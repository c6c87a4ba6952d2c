//! The OpenAPI document and the page that renders it, both compiled in: nothing is
//! fetched from the internet at build or run time.

use base64::Engine;
use sha2::{Digest, Sha256};

pub const OPENAPI_JSON: &str = include_str!("openapi.json");
pub const DOCS_HTML: &str = include_str!("docs.html");

/// The page's CSP allows exactly its one inline script, by hash.
pub fn docs_csp() -> String {
    let script = DOCS_HTML
        .split_once("<script>")
        .and_then(|(_, rest)| rest.split_once("</script>"))
        .map_or("", |(script, _)| script);
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(script.as_bytes()));
    format!(
        "default-src 'none'; script-src 'sha256-{hash}'; style-src 'unsafe-inline'; \
         connect-src 'self'; frame-ancestors 'none'"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_openapi_3_and_names_every_route() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).expect("valid JSON");
        assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
        assert_eq!(doc["info"]["title"], "Notify Queue API");
        for path in [
            "/notifications",
            "/notifications/{id}",
            "/health",
            "/api/docs-json",
        ] {
            assert!(doc["paths"].get(path).is_some(), "{path} missing");
        }
    }

    #[test]
    fn the_csp_hash_matches_the_committed_cross_check() {
        let expected = include_str!("docs.csp-hash.txt").trim();
        assert!(
            docs_csp().contains(expected),
            "{} vs {expected}",
            docs_csp()
        );
    }
}
