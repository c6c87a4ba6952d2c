//! The `deploy-setup` function: a CloudFormation custom resource that brings the schema up
//! to date once per deploy (never in a function's init phase) and creates the first
//! operator key, stored in a Secrets Manager secret of the stack, so the API works right
//! after `sam deploy` and nobody needs a toolchain inside the VPC.
//!
//! CloudFormation waits for the answer at the event's pre-signed `ResponseURL`: every event
//! gets one, SUCCESS or FAILED with the reason, or the stack would hang for an hour.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::{self, Scope};
use crate::cold_start::ColdStart;
use crate::config::DatabaseTimeouts;
use crate::db::{self, Database};
use crate::secrets::Secrets;

/// The one physical resource: the schema of the stack's database. It never changes, so an
/// update is never read by CloudFormation as a replacement (which would delete the old one).
pub const PHYSICAL_RESOURCE_ID: &str = "notify-queue-schema";

/// The name the bootstrap key is listed under (`GET`-able with `notify-local keys list`).
pub const BOOTSTRAP_KEY_NAME: &str = "deploy-bootstrap";

/// What CloudFormation sends (the fields this resource reads).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CustomResourceEvent {
    pub request_type: RequestType,
    #[serde(rename = "ResponseURL")]
    pub response_url: String,
    pub stack_id: String,
    pub request_id: String,
    pub logical_resource_id: String,
    #[serde(default)]
    pub physical_resource_id: Option<String>,
    #[serde(default)]
    pub resource_properties: SetupProperties,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum RequestType {
    Create,
    Update,
    Delete,
}

/// The resource's properties in template.yaml.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SetupProperties {
    /// The stack's secret that receives the first operator key.
    #[serde(default)]
    pub operator_key_secret_arn: Option<String>,
}

/// What is PUT to the `ResponseURL`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct CustomResourceResponse {
    pub status: &'static str,
    pub reason: String,
    pub physical_resource_id: String,
    pub stack_id: String,
    pub request_id: String,
    pub logical_resource_id: String,
    pub data: SetupData,
}

/// `Fn::GetAtt`-able results.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct SetupData {
    /// How many migrations this event applied (as text: CloudFormation attributes are).
    pub migrations_applied: String,
    /// "true" when this event created the first operator key.
    pub operator_key_created: String,
}

/// What `deploy-setup` needs, built once per container.
pub struct SetupFunction {
    database: Database,
    secrets: Option<Secrets>,
    http: reqwest::Client,
}

impl SetupFunction {
    /// From a cold start; Secrets Manager is needed only to store the first key.
    pub async fn new(start: &ColdStart) -> anyhow::Result<Self> {
        SetupFunction::with(start.database.clone(), Some(Secrets::from_env().await))
    }

    /// From parts (tests point `secrets` at a local Secrets Manager).
    pub fn with(database: Database, secrets: Option<Secrets>) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .context("cannot build the HTTP client")?;
        Ok(SetupFunction {
            database,
            secrets,
            http,
        })
    }

    /// Handles one event and answers CloudFormation. An event without a `ResponseURL`
    /// cannot be answered: that is the only error returned without answering.
    pub async fn invoke(&self, event: Value) -> anyhow::Result<CustomResourceResponse> {
        let event: CustomResourceEvent =
            serde_json::from_value(event).context("not a CloudFormation custom resource event")?;
        let result = match event.request_type {
            RequestType::Create | RequestType::Update => self.set_up(&event).await,
            // The schema and its data outlive the stack: deleting a stack never drops them.
            RequestType::Delete => Ok(SetupData::default()),
        };
        let (status, reason, data) = match result {
            Ok(data) => ("SUCCESS", "done".to_string(), data),
            Err(error) => {
                let reason = crate::telemetry::describe(&error);
                tracing::error!(error = %reason, "deploy setup failed");
                ("FAILED", reason, SetupData::default())
            }
        };
        let response = CustomResourceResponse {
            status,
            reason,
            physical_resource_id: event
                .physical_resource_id
                .clone()
                .unwrap_or_else(|| PHYSICAL_RESOURCE_ID.to_string()),
            stack_id: event.stack_id.clone(),
            request_id: event.request_id.clone(),
            logical_resource_id: event.logical_resource_id.clone(),
            data,
        };
        self.answer(&event.response_url, &response).await?;
        Ok(response)
    }

    async fn set_up(&self, event: &CustomResourceEvent) -> anyhow::Result<SetupData> {
        let applied = db::migrate_database(&self.database)
            .await
            .context("migrations")?;
        let created = match &event.resource_properties.operator_key_secret_arn {
            Some(arn) => self
                .bootstrap_key(arn)
                .await
                .context("first operator key")?,
            None => false,
        };
        tracing::info!(
            migrations_applied = applied.len(),
            operator_key_created = created,
            "deploy setup done"
        );
        Ok(SetupData {
            migrations_applied: applied.len().to_string(),
            operator_key_created: created.to_string(),
        })
    }

    /// Creates an operator key when no active key exists and stores it in `arn`. The key's
    /// row is committed only once the secret holds it: a key nobody can read never exists.
    /// With keys present nothing changes, so a redeploy never adds keys.
    async fn bootstrap_key(&self, arn: &str) -> anyhow::Result<bool> {
        let secrets = self
            .secrets
            .as_ref()
            .context("no Secrets Manager client to store the key in")?;
        let pool = self.database.pool(1, &DatabaseTimeouts::default())?;
        let mut client = pool.get().await.context("no database connection")?;
        let transaction = client.transaction().await?;
        // Two setups at once (a retried event) must not both create a key.
        auth::lock_first_key(&transaction).await?;
        if auth::active_key_count(&transaction).await? > 0 {
            return Ok(false);
        }
        let (_, key) = auth::create_key(&transaction, BOOTSTRAP_KEY_NAME, Scope::Operator).await?;
        secrets.put(arn, &key).await?;
        transaction
            .commit()
            .await
            .context("cannot commit the key")?;
        Ok(true)
    }

    /// PUTs the answer to the pre-signed URL. No content type: S3 signed the URL without one.
    async fn answer(&self, url: &str, response: &CustomResourceResponse) -> anyhow::Result<()> {
        let body = serde_json::to_vec(response).context("response as JSON")?;
        let reply = self
            .http
            .put(url)
            .body(body)
            .send()
            .await
            .context("cannot send the answer to CloudFormation")?;
        anyhow::ensure!(
            reply.status().is_success(),
            "CloudFormation's response URL answered {}",
            reply.status()
        );
        Ok(())
    }
}
