//! Locales: how they are spelled, and which of a version's bodies a notification gets.

/// `en`, `pt-BR`, `zh-Hant-TW`: a BCP 47 language tag of letters, digits and hyphens.
pub fn is_locale(text: &str) -> bool {
    let mut parts = text.split('-');
    let language_ok = parts
        .next()
        .is_some_and(|l| (2..=8).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_alphabetic()));
    let mut count = 0;
    let rest_ok = parts.all(|p| {
        count += 1;
        (1..=8).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphanumeric())
    });
    language_ok && rest_ok && count <= 4
}

/// The first locale of `available` on the fallback chain of `wanted`: the tag itself,
/// then each shorter prefix (`pt-BR` → `pt`), then `default`. Tags compare without case;
/// the answer is spelled as `available` spells it.
pub fn resolve<'a>(
    wanted: Option<&str>,
    default: &'a str,
    available: impl IntoIterator<Item = &'a str> + Clone,
) -> &'a str {
    let find = |tag: &str| {
        available
            .clone()
            .into_iter()
            .find(|a| a.eq_ignore_ascii_case(tag))
    };
    let mut tag = wanted.unwrap_or(default);
    loop {
        if let Some(found) = find(tag) {
            return found;
        }
        match tag.rfind('-') {
            Some(cut) => tag = &tag[..cut],
            None => return default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_walks_to_the_language_then_the_default() {
        let available = ["en", "pt", "fr-CA"];
        assert_eq!(resolve(Some("pt-BR"), "en", available), "pt");
        assert_eq!(resolve(Some("PT-br"), "en", available), "pt");
        assert_eq!(resolve(Some("fr-CA"), "en", available), "fr-CA");
        assert_eq!(resolve(Some("fr"), "en", available), "en");
        assert_eq!(resolve(Some("de-DE-1996"), "en", available), "en");
        assert_eq!(resolve(None, "en", available), "en");
    }

    #[test]
    fn tags_are_checked() {
        for good in ["en", "pt-BR", "zh-Hant-TW", "es-419"] {
            assert!(is_locale(good), "{good}");
        }
        for bad in [
            "",
            "e",
            "en_US",
            "en-",
            "-en",
            "toolonglanguage",
            "en-a-b-c-d-e",
        ] {
            assert!(!is_locale(bad), "{bad}");
        }
    }
}
