//! Secrets Manager: the deployed functions read the database login, `UNSUBSCRIBE_SECRET` and
//! the webhook signing secret from secrets named by ARN, so no secret value sits in a
//! function's configuration and a rotated value reaches running containers without a deploy.

use std::time::Duration;

use anyhow::Context;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_secretsmanager::error::DisplayErrorContext;
use serde::Deserialize;

/// A Secrets Manager client; cheap to clone.
#[derive(Clone, Debug)]
pub struct Secrets {
    client: aws_sdk_secretsmanager::Client,
}

/// A fetch must fit a cold start (Lambda gives the init phase 10 s) with room for the
/// database connection after it.
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

impl Secrets {
    /// The standard credential and region chain of the function's environment.
    pub async fn from_env() -> Self {
        let sdk = aws_config::from_env()
            .http_client(crate::provider::aws_http::client(Some(CONNECT_TIMEOUT)))
            .retry_config(RetryConfig::standard().with_max_attempts(2))
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_timeout(FETCH_TIMEOUT)
                    .connect_timeout(CONNECT_TIMEOUT)
                    .build(),
            )
            .load()
            .await;
        Secrets::new(&sdk)
    }

    pub fn new(sdk: &aws_config::SdkConfig) -> Self {
        Secrets {
            client: aws_sdk_secretsmanager::Client::new(sdk),
        }
    }

    /// The current value (`AWSCURRENT`) of a text secret.
    pub async fn fetch(&self, arn: &str) -> anyhow::Result<String> {
        let output = self
            .client
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|error| anyhow::anyhow!("{}", DisplayErrorContext(error)))
            .with_context(|| format!("cannot read the secret {arn}"))?;
        output
            .secret_string
            .with_context(|| format!("the secret {arn} holds no text (SecretString)"))
    }

    /// Stores `value` as the secret's new current value.
    pub async fn put(&self, arn: &str, value: &str) -> anyhow::Result<()> {
        self.client
            .put_secret_value()
            .secret_id(arn)
            .secret_string(value)
            .send()
            .await
            .map_err(|error| anyhow::anyhow!("{}", DisplayErrorContext(error)))
            .with_context(|| format!("cannot store a value in the secret {arn}"))?;
        Ok(())
    }

    /// A database login: the JSON RDS and RDS Proxy use (`username`, `password`, and for
    /// secrets RDS attaches to an instance also `host`, `port` and `dbname`).
    pub async fn fetch_login(&self, arn: &str) -> anyhow::Result<DatabaseLogin> {
        let text = self.fetch(arn).await?;
        // The parse error names the missing key; serde never quotes the password back.
        serde_json::from_str(&text).map_err(|error| {
            anyhow::anyhow!(
                "the secret {arn} is not a database login {{\"username\", \"password\", …}} \
                 (line {}, column {}: {})",
                error.line(),
                error.column(),
                match error.classify() {
                    serde_json::error::Category::Data => "a key is missing or of the wrong type",
                    _ => "not valid JSON",
                }
            )
        })
    }
}

/// What a database secret holds. Host, port and database name are optional: the template
/// names the RDS Proxy endpoint, which wins over the instance the secret describes.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct DatabaseLogin {
    pub username: String,
    pub password: String,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default, deserialize_with = "port_number_or_text")]
    pub port: Option<u16>,
    #[serde(default)]
    pub dbname: Option<String>,
}

impl std::fmt::Debug for DatabaseLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseLogin")
            .field("username", &self.username)
            .field("password", &"***")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("dbname", &self.dbname)
            .finish()
    }
}

/// RDS writes the port as a number; secrets written by hand often hold it as text.
fn port_number_or_text<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u16>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Port {
        Number(u16),
        Text(String),
    }
    match Option::<Port>::deserialize(deserializer)? {
        None => Ok(None),
        Some(Port::Number(port)) => Ok(Some(port)),
        Some(Port::Text(text)) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom("port is not a port number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_rds_secret_and_a_hand_written_one_both_parse() {
        let rds: DatabaseLogin = serde_json::from_str(
            r#"{"username":"app","password":"p@ss/w:rd?#","engine":"postgres","host":"db","port":5432,"dbname":"notify"}"#,
        )
        .expect("rds secret");
        assert_eq!(rds.password, "p@ss/w:rd?#");
        assert_eq!(rds.port, Some(5432));
        let by_hand: DatabaseLogin =
            serde_json::from_str(r#"{"username":"app","password":"x","port":"6432"}"#)
                .expect("hand-written secret");
        assert_eq!(by_hand.port, Some(6432));
        assert_eq!(by_hand.host, None);
        assert!(!format!("{rds:?}").contains("p@ss"));
    }
}
