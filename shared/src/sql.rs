//! Every SQL statement the service runs is a complete statement in a file of its own under
//! `shared/sql/<table>/`, the folder of the table it is about, with fixed placeholder
//! numbers and a header comment naming them. Code names a statement with [`statement!`];
//! the integration tests prepare every file against the migrated schema, so a renamed
//! column fails one test that names the statement.

use deadpool_postgres::GenericClient;

/// A statement: its name (the file under `shared/sql/`, without `.sql`) and its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statement {
    pub name: &'static str,
    pub text: &'static str,
}

impl Statement {
    /// Prepared once per connection and cached there.
    pub async fn prepare(
        &self,
        db: &impl GenericClient,
    ) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
        db.prepare_cached(self.text).await
    }
}

/// `statement!("<table>/<name>")` is the statement in `shared/sql/<table>/<name>.sql`.
macro_rules! statement {
    ($name:literal) => {
        $crate::sql::Statement {
            name: $name,
            text: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/sql/", $name, ".sql")),
        }
    };
}
pub(crate) use statement;

/// The folder holding every statement file (the tests prepare each one).
pub const SQL_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sql");

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn files(dir: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("readable folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                files(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs" || e == "sql") {
                found.push(path.display().to_string());
            }
        }
    }

    /// Every file under `shared/sql/` is used by exactly one `statement!`, and every
    /// `statement!` names a file (the second half is also checked by the compiler).
    #[test]
    fn every_statement_file_is_used_once() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut sources = Vec::new();
        files(&root.join("src"), &mut sources);
        let code: String = sources
            .iter()
            .map(|file| std::fs::read_to_string(file).unwrap_or_default())
            .collect();
        let mut statements = Vec::new();
        files(&root.join("sql"), &mut statements);
        assert!(!statements.is_empty());
        for file in statements {
            let name = file
                .strip_prefix(&format!("{}/", super::SQL_DIR))
                .and_then(|n| n.strip_suffix(".sql"))
                .expect("a .sql file under sql/");
            let uses = code.matches(&format!("statement!(\"{name}\")")).count();
            assert_eq!(uses, 1, "{name}.sql is used {uses} times");
        }
    }
}
