//! Every statement file under `shared/sql/` prepares against the migrated schema, so a
//! renamed column or table fails here, naming the file, rather than at run time.

use std::path::{Path, PathBuf};

use notify_shared::sql::SQL_DIR;
use notify_tests::TestDb;

/// Every `.sql` file under `dir`, at any depth, sorted.
fn statement_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let entries = std::fs::read_dir(&folder)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", folder.display()));
        for entry in entries {
            let path = entry.expect("folder entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "sql") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

#[tokio::test]
async fn every_statement_file_prepares_against_a_freshly_migrated_database() {
    let db = TestDb::new().await;
    let client = db.pool.get().await.expect("connection");
    // The check has teeth: preparing is checked against the schema.
    assert!(
        client
            .prepare("SELECT no_such_column FROM notifications")
            .await
            .is_err(),
        "a statement naming a missing column prepared"
    );

    let files = statement_files(Path::new(SQL_DIR));
    assert!(
        files.len() >= 30,
        "only {} statement files under {SQL_DIR}",
        files.len()
    );
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", file.display()));
        let name = file.strip_prefix(SQL_DIR).unwrap_or(file).display();
        if text.trim().is_empty() {
            failures.push(format!("{name}: empty"));
            continue;
        }
        if let Err(error) = client.prepare(&text).await {
            let reason = error
                .as_db_error()
                .map_or_else(|| error.to_string(), |db| db.message().to_string());
            failures.push(format!("{name}: {reason}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} statements do not prepare:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}
