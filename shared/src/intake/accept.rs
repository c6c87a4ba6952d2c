//! Reading `Accept`: which of two media types a client prefers, for the routes that answer
//! in more than one (`/metrics` as JSON or Prometheus text, an unsubscribe link as JSON or
//! a page).

/// Whether `accept` asks for `wanted` over `fallback`: media types compared without case,
/// each weighed by its `q` (1 when absent). The fallback stays the default: it wins a
/// tie, and wildcards count for neither.
pub fn prefers(accept: &str, wanted: &str, fallback: &str) -> bool {
    let wanted = weight(accept, wanted);
    wanted > 0.0 && wanted > weight(accept, fallback)
}

/// The highest `q` any range of `accept` gives `media` itself (0 when none names it).
fn weight(accept: &str, media: &str) -> f64 {
    accept
        .split(',')
        .filter_map(|range| {
            let mut parts = range.split(';');
            if !parts.next()?.trim().eq_ignore_ascii_case(media) {
                return None;
            }
            parts
                .filter_map(|p| p.split_once('='))
                .find(|(name, _)| name.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1.0), |(_, value)| value.trim().parse::<f64>().ok())
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::prefers;

    const JSON: &str = "application/json";

    #[test]
    fn prometheus_text_is_chosen_by_type_and_weight() {
        for text in [
            "text/plain",
            "TEXT/Plain; version=0.0.4",
            "application/json;q=0.1, text/plain",
            "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1",
        ] {
            assert!(prefers(text, "text/plain", JSON), "{text}");
        }
        for json in [
            "",
            "*/*",
            "application/json",
            "text/plain, application/json",
            "text/plain;q=0",
            "text/plain;q=0.5, application/json",
            "text/plain;q=nonsense",
            "text/html",
        ] {
            assert!(!prefers(json, "text/plain", JSON), "{json}");
        }
    }

    #[test]
    fn a_browser_gets_the_page_and_a_mail_client_json() {
        let browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
        assert!(prefers(browser, "text/html", JSON));
        for client in [
            "application/json",
            "*/*",
            "",
            "text/html;q=0.2, application/json",
        ] {
            assert!(!prefers(client, "text/html", JSON), "{client}");
        }
    }
}
