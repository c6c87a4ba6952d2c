//! One-click unsubscribe links (RFC 8058): `{PUBLIC_BASE_URL}/unsubscribe/{token}`, where
//! the token carries what to unsubscribe (whose profile or which address, the channel and
//! the category) and an HMAC-SHA256 of it keyed by `UNSUBSCRIBE_SECRET`. Verifying needs no
//! database; a token altered in any way is refused.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::notification::Channel;

/// Who is unsubscribed: a recipient profile (by owner and id) or a bare address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Subject {
    #[serde(rename = "r")]
    Profile { owner: Uuid, id: String },
    #[serde(rename = "a")]
    Address(String),
}

/// What a token says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unsubscribe {
    #[serde(rename = "s")]
    pub subject: Subject,
    #[serde(rename = "c")]
    pub channel: Channel,
    /// A category, or `*` for every bulk category.
    #[serde(rename = "k")]
    pub category: String,
}

impl Unsubscribe {
    /// `<base64url JSON>.<base64url HMAC>`.
    pub fn token(&self, secret: &[u8]) -> String {
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default());
        let signature = URL_SAFE_NO_PAD.encode(mac(secret, body.as_bytes()));
        format!("{body}.{signature}")
    }

    /// The link a bulk email carries.
    pub fn url(&self, secret: &[u8], public_base_url: &str) -> String {
        format!("{public_base_url}/unsubscribe/{}", self.token(secret))
    }

    /// What `token` says, if it was made with `secret` and not altered.
    pub fn verify(token: &str, secret: &[u8]) -> Option<Unsubscribe> {
        let (body, signature) = token.split_once('.')?;
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        let expected = mac(secret, body.as_bytes());
        if !bool::from(signature.as_slice().ct_eq(expected.as_slice())) {
            return None;
        }
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()
    }
}

fn mac(secret: &[u8], body: &[u8]) -> Vec<u8> {
    // HMAC takes keys of any length: the error branch cannot be taken.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return Vec::new();
    };
    mac.update(b"notify-queue unsubscribe v1:");
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Unsubscribe {
        Unsubscribe {
            subject: Subject::Profile {
                owner: Uuid::nil(),
                id: "ada".into(),
            },
            channel: Channel::Email,
            category: "news".into(),
        }
    }

    #[test]
    fn a_token_verifies_with_its_secret_only_and_not_once_altered() {
        let token = sample().token(b"secret");
        assert_eq!(Unsubscribe::verify(&token, b"secret"), Some(sample()));
        assert_eq!(Unsubscribe::verify(&token, b"another"), None);
        let (body, signature) = token.split_once('.').expect("two parts");
        let mut other = sample();
        other.category = "*".into();
        let forged_body = other
            .token(b"attacker")
            .split_once('.')
            .expect("parts")
            .0
            .to_string();
        assert_eq!(
            Unsubscribe::verify(&format!("{forged_body}.{signature}"), b"secret"),
            None
        );
        let flipped = format!("{body}.{}A", &signature[..signature.len() - 1]);
        assert_eq!(Unsubscribe::verify(&flipped, b"secret"), None);
        assert_eq!(Unsubscribe::verify("garbage", b"secret"), None);
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        );
    }
}
