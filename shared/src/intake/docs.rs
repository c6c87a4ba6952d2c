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
    use std::collections::HashSet;

    use serde_json::Value;

    use super::*;
    use crate::intake::ROUTES;

    const HTTP_METHODS: [&str; 8] = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];

    fn document() -> Value {
        serde_json::from_str(OPENAPI_JSON).expect("valid JSON")
    }

    /// `value`, or what its `$ref` points at.
    fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
        match value["$ref"].as_str().and_then(|r| r.strip_prefix('#')) {
            Some(pointer) => doc.pointer(pointer).unwrap_or(&Value::Null),
            None => value,
        }
    }

    #[test]
    fn the_document_is_openapi_3() {
        let doc = document();
        assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
        assert_eq!(doc["info"]["title"], "Notify Queue API");
    }

    /// `ROUTES` (next to the router, checked against it there) and the document's
    /// operations are the same set; each operation declares its path's parameters.
    #[test]
    fn every_route_the_router_serves_is_documented_and_nothing_else() {
        let doc = document();
        let mut operation_ids = HashSet::new();
        for (method, path) in ROUTES {
            let operation = &doc["paths"][path][method.to_ascii_lowercase()];
            assert!(
                operation.is_object(),
                "{method} {path} is served but not in openapi.json"
            );
            let id = operation["operationId"].as_str().unwrap_or_default();
            assert!(
                operation_ids.insert(id),
                "{method} {path}: operationId {id:?} missing or repeated"
            );
            assert!(
                operation["responses"]
                    .as_object()
                    .is_some_and(|r| !r.is_empty()),
                "{method} {path} has no responses"
            );
            let parameters: Vec<&Value> = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| resolve(&doc, p))
                .collect();
            for name in path
                .split('/')
                .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            {
                assert!(
                    parameters
                        .iter()
                        .any(|p| p["in"] == "path" && p["name"] == name && p["required"] == true),
                    "{method} {path}: path parameter {name} not declared"
                );
            }
        }
        let paths = doc["paths"].as_object().expect("paths");
        for (path, item) in paths {
            let item = item.as_object().expect("path item");
            for method in item.keys().filter(|k| HTTP_METHODS.contains(&k.as_str())) {
                let method = method.to_ascii_uppercase();
                assert!(
                    ROUTES.contains(&(method.as_str(), path.as_str())),
                    "openapi.json documents {method} {path}, which the router does not serve"
                );
            }
        }
    }

    #[test]
    fn every_reference_resolves() {
        fn references<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(r)) = map.get("$ref") {
                        found.push(r);
                    }
                    map.values().for_each(|v| references(v, found));
                }
                Value::Array(items) => items.iter().for_each(|v| references(v, found)),
                _ => {}
            }
        }
        let doc = document();
        let mut found = Vec::new();
        references(&doc, &mut found);
        assert!(found.len() > 100, "only {} references found", found.len());
        for reference in found {
            let target = reference
                .strip_prefix('#')
                .and_then(|pointer| doc.pointer(pointer));
            assert!(
                target.is_some_and(Value::is_object),
                "{reference} does not resolve"
            );
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
