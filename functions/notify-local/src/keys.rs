//! `notify-local keys create|list|revoke`: API keys in the database `DATABASE_URL` names
//! (keys in a private, throw-away database would be useless). The SQL lives in
//! `notify_shared::auth`.

use anyhow::Context;
use notify_shared::auth;
use notify_shared::config::Config;
use notify_shared::db;

/// `notify-local keys create|list|revoke`: manages API keys in the database named by
/// `DATABASE_URL` (keys in a private, throw-away database would be useless).
pub async fn command(config: &Config, args: &[String]) -> anyhow::Result<()> {
    const USAGE: &str = "usage: notify-local keys create --scope client|operator [--name NAME]\n\
                         \x20      notify-local keys list\n\
                         \x20      notify-local keys revoke KEY_ID";
    let url = config
        .database_url
        .as_deref()
        .context("keys are stored in the database: set DATABASE_URL")?;
    db::migrate(url).await?;
    let pool = db::create_pool(url, 1)?;
    let client = pool.get().await?;
    match args.first().map(String::as_str) {
        Some("create") => {
            let mut scope = None;
            let mut name = "unnamed".to_string();
            let mut rest = args[1..].iter();
            while let Some(flag) = rest.next() {
                match (flag.as_str(), rest.next()) {
                    ("--scope", Some(value)) => {
                        scope = Some(auth::Scope::parse(value).with_context(|| {
                            format!("--scope must be client or operator (got {value:?})\n{USAGE}")
                        })?)
                    }
                    ("--name", Some(value)) => name = value.clone(),
                    _ => anyhow::bail!("unexpected argument {flag:?}\n{USAGE}"),
                }
            }
            let scope = scope.with_context(|| format!("--scope is required\n{USAGE}"))?;
            let length = name.chars().count();
            anyhow::ensure!(
                (1..=200).contains(&length),
                "--name must be 1 to 200 characters (got {length})\n{USAGE}"
            );
            let (id, key) = auth::create_key(&client, &name, scope).await?;
            eprintln!(
                "created {} key {id} ({name}); the key is shown once, store it now:",
                scope.as_str()
            );
            println!("{key}");
        }
        Some("list") => {
            for key in auth::list_keys(&client).await? {
                let state = match key.revoked_at {
                    Some(at) => {
                        format!("revoked {}", notify_shared::notification::format_time(&at))
                    }
                    None => "active".to_string(),
                };
                println!(
                    "{}  {:8}  {:7}  created {}  {}",
                    key.id,
                    key.scope,
                    state,
                    notify_shared::notification::format_time(&key.created_at),
                    key.name
                );
            }
        }
        Some("revoke") => {
            let id = args
                .get(1)
                .and_then(|id| uuid::Uuid::try_parse(id).ok())
                .with_context(|| format!("revoke needs a key id (see `keys list`)\n{USAGE}"))?;
            anyhow::ensure!(auth::revoke_key(&client, id).await?, "no active key {id}");
            eprintln!("revoked {id}; running processes stop accepting it within 10 s");
        }
        _ => anyhow::bail!("{USAGE}"),
    }
    Ok(())
}
