//! From validated requests to rows: the audience rules applied to a whole batch with one
//! read of the profiles it names and one of the suppression list, however many items.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, TimeDelta, Utc};
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::request::{CreateRequest, RequestTarget};
use serde_json::{Value, json};

use crate::audience::{self, Decision, Facts, Request, Target, address, profiles, suppressions};
use crate::content::Reference;
use crate::queue::{Due, NewNotification};

/// The rows `requests` become for `owner` (the caller's key), each with the audience
/// decision taken: its address, SUPPRESSED or PENDING, its due time after quiet hours.
pub async fn admit(
    db: &impl GenericClient,
    secret: &[u8],
    owner: Option<Uuid>,
    requests: Vec<CreateRequest>,
    max_attempts: i32,
    now: DateTime<Utc>,
) -> Result<Vec<NewNotification>, tokio_postgres::Error> {
    let ids: HashSet<&str> = requests
        .iter()
        .filter_map(|r| match &r.target {
            RequestTarget::Profile(id) => Some(id.as_str()),
            RequestTarget::Address(_) => None,
        })
        .collect();
    let ids: Vec<&str> = ids.into_iter().collect();
    let profiles: HashMap<String, audience::Profile> =
        profiles::facts(db, profiles::owner(owner), &ids)
            .await?
            .into_iter()
            .collect();

    // Every address the batch would send to, hashed as the suppression list keeps them.
    let wanted: Vec<_> = requests
        .iter()
        .filter_map(|r| {
            let address = match &r.target {
                RequestTarget::Address(address) => Some(address.as_str()),
                RequestTarget::Profile(id) => profiles.get(id).and_then(|p| p.address(r.channel)),
            }?;
            Some((r.channel, address::hash(secret, r.channel, address)))
        })
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let facts = Facts {
        suppressed: suppressions::listed(db, &wanted)
            .await?
            .into_iter()
            .collect(),
        profiles,
    };
    Ok(decide_all(
        secret,
        owner,
        requests,
        max_attempts,
        now,
        &facts,
    ))
}

/// The row a request naming its address (no profile) becomes, with nothing read: the
/// insert looks the address up on the suppression list itself ([`NewNotification::listed_hash`]),
/// where [`admit`] reads the list first. What a single POST takes, one round trip fewer.
pub fn admit_addressed(
    secret: &[u8],
    owner: Option<Uuid>,
    request: CreateRequest,
    max_attempts: i32,
    now: DateTime<Utc>,
) -> Option<NewNotification> {
    let RequestTarget::Address(address) = &request.target else {
        return None;
    };
    let hash = address::hash(secret, request.channel, address);
    let mut rows = decide_all(
        secret,
        owner,
        vec![request],
        max_attempts,
        now,
        &Facts::default(),
    );
    let mut row = rows.pop()?;
    row.listed_hash = Some(hash);
    Some(row)
}

/// The audience decision for each of `requests`, from what was read of them.
fn decide_all(
    secret: &[u8],
    owner: Option<Uuid>,
    requests: Vec<CreateRequest>,
    max_attempts: i32,
    now: DateTime<Utc>,
    facts: &Facts,
) -> Vec<NewNotification> {
    requests
        .into_iter()
        .map(|request| {
            let due_at = match request.due {
                Due::At(at) => at.max(now),
                Due::AfterSeconds(seconds) => now + TimeDelta::seconds(i64::from(seconds)),
            };
            let target = match &request.target {
                RequestTarget::Address(address) => Target::Address(address),
                RequestTarget::Profile(id) => Target::Profile(id),
            };
            let decision = audience::decide(
                &Request {
                    channel: request.channel,
                    class: request.class,
                    category: &request.category,
                    target,
                    due: due_at,
                },
                facts,
                secret,
            );
            let profile = match &request.target {
                RequestTarget::Profile(id) => facts.profiles.get(id),
                RequestTarget::Address(_) => None,
            };
            let payload = stored_payload(&request, profile);
            let mut new = row(request, decision, due_at, max_attempts, owner);
            new.erased_fingerprint = Some(address::erased_fingerprint(secret, &new.fingerprint));
            if let Some(payload) = payload {
                new.payload = payload;
            }
            new
        })
        .collect()
}

/// The payload a template notification stores: its pinned reference, with the locale
/// resolved (the request's, else the profile's, else the version's default, down the
/// fallback chain), and its data; a campaign's data also gets `recipient` (the profile's
/// id, addresses, locale and timezone). `None` for a
/// literal payload, or a template not pinned (which [`super::templated::pin`] prevents).
fn stored_payload(request: &CreateRequest, profile: Option<&audience::Profile>) -> Option<Value> {
    let template = request.template.as_ref()?;
    let version = template.pinned.as_ref()?;
    let wanted = template
        .locale
        .as_deref()
        .or(profile.map(|p| p.locale.as_str()));
    let reference = Reference {
        id: version.template_id.clone(),
        version: version.version,
        locale: version.resolve_locale(wanted).to_string(),
        campaign: template.campaign,
    };
    let mut data = request.payload.clone();
    if template.campaign.is_some()
        && let RequestTarget::Profile(id) = &request.target
        && let Value::Object(fields) = &mut data
    {
        fields.insert(
            "recipient".into(),
            json!({
                "id": id,
                "email": profile.and_then(|p| p.email.as_deref()),
                "phone": profile.and_then(|p| p.phone.as_deref()),
                "locale": profile.map(|p| p.locale.as_str()),
                "timezone": profile.map(|p| p.timezone.name()),
            }),
        );
    }
    Some(reference.payload(data))
}

fn row(
    request: CreateRequest,
    decision: Decision,
    due_at: DateTime<Utc>,
    max_attempts: i32,
    owner: Option<Uuid>,
) -> NewNotification {
    let fingerprint = request.fingerprint();
    let (recipient, suppressed, deferred) = match decision {
        Decision::Queue { address, deferred } => (address, None, deferred),
        Decision::Suppress { address, reason } => (address, Some(reason), None),
    };
    let mut new = NewNotification::new(
        request.idempotency_key,
        fingerprint,
        recipient,
        request.channel,
        request.payload,
        deferred.map_or(request.due, Due::At),
        max_attempts,
    );
    new.priority = request.priority;
    new.owner_key_id = owner;
    new.recipient_id = match request.target {
        RequestTarget::Profile(id) => Some(id),
        RequestTarget::Address(_) => None,
    };
    new.class = request.class;
    new.category = request.category;
    new.expiry = request.expiry;
    new.suppressed = suppressed;
    new.quiet_hours_deferred_from = deferred.map(|_| due_at);
    new
}
