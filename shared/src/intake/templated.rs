//! Pinning at enqueue: every request that names a template gets the version it will be
//! rendered with (the latest when none is named), read once for a whole batch. An
//! unknown template or version, or one made for another channel, is the request's 400.

use std::collections::HashSet;

use deadpool_postgres::GenericClient;

use super::request::CreateRequest;
use crate::content::templates;
use crate::problems::{FieldError, Problems};

/// `requests` with their versions pinned, or each one's problems.
pub async fn pin(
    db: &impl GenericClient,
    requests: Vec<CreateRequest>,
) -> Result<Vec<Result<CreateRequest, Vec<FieldError>>>, tokio_postgres::Error> {
    let asked: HashSet<(String, Option<i32>)> = requests
        .iter()
        .filter_map(|r| r.template.as_ref().map(|t| (t.id.clone(), t.version)))
        .collect();
    let asked: Vec<(&str, Option<i32>)> = asked.iter().map(|(id, v)| (id.as_str(), *v)).collect();
    let found = templates::resolve(db, &asked).await?;
    Ok(requests
        .into_iter()
        .map(|mut request| {
            let channel = request.channel;
            let Some(template) = request.template.as_mut() else {
                return Ok(request);
            };
            let mut problems = Problems::new();
            match found.get(&(template.id.clone(), template.version)) {
                None => match template.version {
                    Some(version) => problems.add(
                        "template.version",
                        format!("Template {} has no version {version}", template.id),
                    ),
                    None => {
                        problems.add("template.id", format!("Template {} not found", template.id))
                    }
                },
                Some(version) if version.channel != channel => problems.add(
                    "template.id",
                    format!(
                        "Template {} is for {}, not {}",
                        template.id,
                        version.channel.as_str(),
                        channel.as_str()
                    ),
                ),
                Some(version) => template.pinned = Some(version.clone()),
            }
            problems.or(request).map_err(Problems::into_errors)
        })
        .collect())
}
