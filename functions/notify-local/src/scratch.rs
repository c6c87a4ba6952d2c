//! Per-run databases: the tests and the benchmark each create a database of their own
//! next to the one `DATABASE_URL` names (or on a private server) and drop it afterwards.

use anyhow::Context;
use notify_shared::db;

/// `url` with its database name replaced (the query string is kept).
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{database}", &base[..authority_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// Drops `database` on the server of `admin_url`, disconnecting whoever is still in it
/// (tests and the benchmark create one database per run).
pub async fn drop_database(admin_url: &str, database: &str) -> anyhow::Result<()> {
    let admin = db::connect(admin_url).await?;
    admin
        .batch_execute(&format!(
            "DROP DATABASE IF EXISTS \"{database}\" WITH (FORCE)"
        ))
        .await
        .with_context(|| format!("cannot drop database {database}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_are_replaced_in_urls() {
        assert_eq!(
            with_database("postgres://u:p@h:5/db?sslmode=require", "x"),
            "postgres://u:p@h:5/x?sslmode=require"
        );
        assert_eq!(with_database("postgres://u@h", "x"), "postgres://u@h/x");
    }
}
