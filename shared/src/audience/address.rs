//! Addresses as the audience rules compare them: email case-insensitively, phone numbers
//! and push targets exactly; and the keyed hash the suppression list finds them by, so an
//! erased person's address need not be kept to keep them suppressed.

use hmac::{Hmac, Mac};
use sha2::Sha256;

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

#[cfg(test)]
mod tests {
    use super::*;

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
