//! Addresses as the audience rules compare them: email case-insensitively, phone numbers
//! and push targets exactly; the keyed hash the suppression list finds them by, so an
//! erased person's address need not be kept to keep them suppressed; and the keyed form
//! erasure gives a request's fingerprint, which was taken over the address.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// SHA-256's block size: an HMAC key is padded (or first hashed) to it.
const BLOCK: usize = 64;

use crate::notification::Channel;

/// The form an address is compared in.
pub fn normalize(channel: Channel, address: &str) -> String {
    match channel {
        Channel::Email => address.trim().to_lowercase(),
        Channel::Sms | Channel::Push => address.to_string(),
    }
}

/// Hex HMAC-SHA256, keyed by `UNSUBSCRIBE_SECRET`, of `<channel>:<normalized address>`.
pub fn hash(secret: &[u8], channel: Channel, address: &str) -> String {
    // HMAC takes keys of any length: the error branch cannot be taken.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(channel.as_str().as_bytes());
    mac.update(b":");
    mac.update(normalize(channel, address).as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// What erasure leaves of a request's fingerprint (a SHA-256 of the request, address and
/// payload included, which a guess could be tested against): HMAC-SHA256 of its hex, keyed
/// by `UNSUBSCRIBE_SECRET`. A replay of the same request, fingerprinted again and keyed
/// the same way, is still recognised.
pub fn erased_fingerprint(secret: &[u8], fingerprint: &str) -> String {
    // HMAC takes keys of any length: the error branch cannot be taken.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(fingerprint.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The inner and outer padded keys of HMAC-SHA256 under `secret` (RFC 2104), so that the
/// erasure statement computes [`erased_fingerprint`] with PostgreSQL's own `sha256`:
/// `sha256(outer || sha256(inner || message))`.
pub fn hmac_pads(secret: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut key = if secret.len() > BLOCK {
        Sha256::digest(secret).to_vec()
    } else {
        secret.to_vec()
    };
    key.resize(BLOCK, 0);
    let inner = key.iter().map(|b| b ^ 0x36).collect();
    let outer = key.iter().map(|b| b ^ 0x5c).collect();
    (inner, outer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pads_compute_the_same_hmac_as_the_crate() {
        for secret in [b"dev".to_vec(), vec![7u8; 64], vec![9u8; 100]] {
            let (inner, outer) = hmac_pads(&secret);
            let fingerprint = "ab".repeat(32);
            let inside = Sha256::digest([inner.as_slice(), fingerprint.as_bytes()].concat());
            let by_hand = Sha256::digest([outer.as_slice(), inside.as_slice()].concat());
            assert_eq!(
                hex::encode(by_hand),
                erased_fingerprint(&secret, &fingerprint)
            );
        }
    }

    #[test]
    fn email_compares_case_insensitively_and_other_channels_exactly() {
        let key = b"k";
        assert_eq!(
            hash(key, Channel::Email, "Ada@Example.com"),
            hash(key, Channel::Email, " ada@example.com")
        );
        assert_ne!(
            hash(key, Channel::Push, "Token"),
            hash(key, Channel::Push, "token")
        );
        assert_ne!(
            hash(key, Channel::Email, "a@example.com"),
            hash(key, Channel::Sms, "a@example.com")
        );
        assert_eq!(hash(key, Channel::Sms, "+15555550100").len(), 64);
    }
}
