//! What the audience layer needs: the key of unsubscribe links and of the suppression
//! list's address hashes, and the public address the links point at.

use super::env::Env;

/// Used when `UNSUBSCRIBE_SECRET` is not set, by the local runner only: anyone who reads
/// this source can forge its links. Deployed functions refuse to start without the setting.
pub const DEVELOPMENT_SECRET: &[u8] =
    b"notify-queue local development only; set UNSUBSCRIBE_SECRET";

#[derive(Clone, PartialEq, Eq)]
pub struct AudienceConfig {
    /// `UNSUBSCRIBE_SECRET`: signs unsubscribe links and keys the suppression list's
    /// address hashes. Changing it invalidates both: keep it for the life of the database.
    pub secret: Vec<u8>,
    /// True when `UNSUBSCRIBE_SECRET` was not set and [`DEVELOPMENT_SECRET`] is in use.
    pub development_secret: bool,
    /// `PUBLIC_BASE_URL`: where `/unsubscribe/{token}` is reached from the internet.
    pub public_base_url: String,
}

impl AudienceConfig {
    /// The local runner's settings when nothing is configured (tests too).
    pub fn development() -> Self {
        AudienceConfig {
            secret: DEVELOPMENT_SECRET.to_vec(),
            development_secret: true,
            public_base_url: "http://127.0.0.1:3000".to_string(),
        }
    }
}

impl std::fmt::Debug for AudienceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AudienceConfig")
            .field("secret", &"***")
            .field("development_secret", &self.development_secret)
            .field("public_base_url", &self.public_base_url)
            .finish()
    }
}

pub(super) fn read(env: &mut Env, port: u16) -> AudienceConfig {
    let secret = env.string("UNSUBSCRIBE_SECRET");
    if let Some(secret) = &secret
        && secret.len() < 32
    {
        env.problems
            .push("UNSUBSCRIBE_SECRET must be at least 32 characters".to_string());
    }
    let public_base_url = env
        .string("PUBLIC_BASE_URL")
        .unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
    if !(public_base_url.starts_with("https://") || public_base_url.starts_with("http://")) {
        env.problems.push(format!(
            "PUBLIC_BASE_URL must be an http:// or https:// URL (got {public_base_url:?})"
        ));
    }
    AudienceConfig {
        development_secret: secret.is_none(),
        secret: secret.map_or_else(|| DEVELOPMENT_SECRET.to_vec(), String::into_bytes),
        public_base_url: public_base_url.trim_end_matches('/').to_string(),
    }
}
