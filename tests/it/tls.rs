//! TLS between Notify Queue and PostgreSQL, against a private server whose certificate is
//! made here with the `openssl` command: a test CA signs a server certificate for
//! `localhost` only. What each `sslmode` in `DATABASE_URL` does:
//!
//! - `require` encrypts without checking the certificate; `disable` does not encrypt;
//! - `verify-ca` and `verify-full` refuse a certificate from a CA the process does not
//!   trust, and accept one from a CA it does (`SSL_CERT_FILE`); only `verify-full` also
//!   refuses a certificate issued for another host name;
//! - the pool and the migrations work over TLS;
//! - libpq's `sslrootcert`, `sslcert` and `sslkey` are refused rather than ignored.
//!
//! Keys and certificates live in a temporary folder that is removed at the end.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use notify_local::embedded::{EmbeddedPostgres, default_base_dir};
use notify_shared::db;
use notify_tests::notify_local_binary;
use tempfile::TempDir;

/// A private PostgreSQL serving TLS with a certificate signed by a CA made for the test.
struct TlsServer {
    server: EmbeddedPostgres,
    certs: TempDir,
}

impl TlsServer {
    async fn start() -> TlsServer {
        let certs = tempfile::Builder::new()
            .prefix("notify-queue-tls-")
            .tempdir()
            .expect("temporary folder");
        make_certificates(certs.path());
        let server = tokio::task::spawn_blocking(|| EmbeddedPostgres::start(&default_base_dir()))
            .await
            .expect("start task")
            .expect("start a private PostgreSQL");
        install_certificate(certs.path(), server.data_dir());

        let admin = db::connect(&with_sslmode(&server.url(), "disable"))
            .await
            .expect("connect without TLS");
        // Two statements: ALTER SYSTEM refuses to run inside a multi-statement batch.
        for statement in ["ALTER SYSTEM SET ssl = on", "SELECT pg_reload_conf()"] {
            admin.batch_execute(statement).await.expect("turn TLS on");
        }
        // The reload is asynchronous: wait until a new connection can negotiate TLS.
        let deadline = Instant::now() + Duration::from_secs(30);
        while db::connect(&with_sslmode(&server.url(), "require"))
            .await
            .is_err()
        {
            if Instant::now() > deadline {
                let errors = admin
                    .query(
                        "SELECT name, error FROM pg_file_settings WHERE error IS NOT NULL",
                        &[],
                    )
                    .await
                    .map(|rows| {
                        rows.iter()
                            .map(|r| {
                                let name: Option<String> = r.get(0);
                                let error: Option<String> = r.get(1);
                                format!("{name:?}: {error:?}")
                            })
                            .collect::<Vec<_>>()
                    });
                panic!("PostgreSQL did not start serving TLS: {errors:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        TlsServer { server, certs }
    }

    /// A URL naming `host` (the server listens on 127.0.0.1, which `localhost` also
    /// reaches) with the given `sslmode`.
    fn url(&self, host: &str, sslmode: &str) -> String {
        let url = self.server.url().replace("127.0.0.1", host);
        with_sslmode(&url, sslmode)
    }

    fn ca_file(&self) -> PathBuf {
        self.certs.path().join("ca.crt")
    }
}

/// `url` with its query (the private server's own `sslmode`) replaced.
fn with_sslmode(url: &str, sslmode: &str) -> String {
    let base = url.split_once('?').map_or(url, |(base, _)| base);
    format!("{base}?sslmode={sslmode}")
}

/// Runs `openssl` with `args` in `dir`; panics with its output when it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run the openssl command (install the openssl package)");
    assert!(
        output.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `ca.crt`/`ca.key`: a self-signed CA. `server.crt`/`server.key`: a server certificate it
/// signed, valid for the host name `localhost` only (not for 127.0.0.1).
fn make_certificates(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        dir,
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                "/CN=Notify Queue test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        ]
        .concat(),
    );
    openssl(
        dir,
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName = DNS:localhost\n\
         basicConstraints = CA:FALSE\n\
         keyUsage = critical, digitalSignature, keyEncipherment\n\
         extendedKeyUsage = serverAuth\n",
    )
    .expect("write the extensions file");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    );
}

/// Copies the server key pair into the data folder, owned by whoever owns that folder (the
/// `postgres` user when the tests run as root) and private, as PostgreSQL insists.
fn install_certificate(certs: &Path, data_dir: &Path) {
    let owner = std::fs::metadata(data_dir).expect("data folder");
    for (name, mode) in [("server.crt", 0o644), ("server.key", 0o600)] {
        let target = data_dir.join(name);
        std::fs::copy(certs.join(name), &target).expect("copy into the data folder");
        std::os::unix::fs::chown(&target, Some(owner.uid()), Some(owner.gid()))
            .expect("hand the file to the server's user");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))
            .expect("permissions");
    }
}

/// Whether this connection is encrypted, as the server sees it.
async fn server_sees_tls(client: &tokio_postgres::Client) -> bool {
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .expect("pg_stat_ssl")
        .get(0)
}

fn error_text(error: &anyhow::Error) -> String {
    format!("{error:#}")
}

#[tokio::test]
async fn require_encrypts_disable_does_not_and_verification_refuses_an_unknown_ca() {
    let tls = TlsServer::start().await;

    let client = db::connect(&tls.url("127.0.0.1", "require"))
        .await
        .expect("sslmode=require connects to a self-signed server");
    assert!(server_sees_tls(&client).await, "require must encrypt");
    let version: Option<String> = client
        .query_one(
            "SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .expect("protocol")
        .get(0);
    assert!(
        version.as_deref().is_some_and(|v| v.starts_with("TLSv1.")),
        "{version:?}"
    );

    let plain = db::connect(&tls.url("127.0.0.1", "disable"))
        .await
        .expect("sslmode=disable connects");
    assert!(!server_sees_tls(&plain).await, "disable must not encrypt");

    // libpq's certificate file parameters are not supported: refused, never ignored.
    for parameter in ["sslrootcert", "sslcert", "sslkey"] {
        let url = format!(
            "{}&{parameter}=/tmp/ca.crt",
            tls.url("localhost", "verify-full")
        );
        assert!(
            db::create_pool(&url, 1).is_err(),
            "{parameter} must be refused"
        );
    }

    // This process trusts only the system's CAs: the test CA is unknown to it.
    for (host, mode) in [
        ("127.0.0.1", "verify-ca"),
        ("localhost", "verify-ca"),
        ("localhost", "verify-full"),
    ] {
        let error = db::connect(&tls.url(host, mode))
            .await
            .err()
            .unwrap_or_else(|| panic!("sslmode={mode} accepted a certificate from an unknown CA"));
        let text = error_text(&error);
        assert!(
            text.contains("certificate verify failed"),
            "sslmode={mode} at {host}: {text}"
        );
    }
}

#[tokio::test]
async fn a_pool_over_tls_runs_the_migrations_and_every_connection_is_encrypted() {
    let tls = TlsServer::start().await;
    let admin = db::connect(&tls.url("127.0.0.1", "require"))
        .await
        .expect("connect");
    admin
        .batch_execute("CREATE DATABASE notify_tls")
        .await
        .expect("create a database");
    let url = tls
        .url("127.0.0.1", "require")
        .replace("/postgres?", "/notify_tls?");

    db::migrate(&url).await.expect("migrations over TLS");
    let pool = db::create_pool(&url, 4).expect("pool");
    let mut connections = Vec::new();
    for _ in 0..4 {
        connections.push(pool.get().await.expect("a pooled connection over TLS"));
    }
    for connection in &connections {
        assert!(server_sees_tls(connection).await);
    }
    let applied: i64 = connections[0]
        .query_one("SELECT count(*) FROM refinery_schema_history", &[])
        .await
        .expect("migration history")
        .get(0);
    let migrations = std::fs::read_dir(format!("{}/migrations", notify_tests::WORKSPACE))
        .expect("migrations folder")
        .count();
    assert_eq!(applied, migrations as i64);
    let pending: i64 = connections[1]
        .query_one("SELECT count(*) FROM notifications", &[])
        .await
        .expect("the schema is there")
        .get(0);
    assert_eq!(pending, 0);
    let from_notify_queue: i64 = connections[2]
        .query_one(
            "SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
             WHERE a.application_name = 'notify-queue' AND s.ssl",
            &[],
        )
        .await
        .expect("pg_stat_activity")
        .get(0);
    assert_eq!(from_notify_queue, 4, "every pooled connection is encrypted");
}

/// Starts `notify-local` (API only) on `url` and reports whether it got as far as serving:
/// that takes the migrations, the pool and a query. With `ca_file`, that file is the
/// process's trusted CA bundle (`SSL_CERT_FILE`). Returns its stderr when it exits early.
fn serves(url: &str, ca_file: Option<&Path>, log: &Path) -> Result<(), String> {
    let stderr = std::fs::File::create(log).map_err(|e| e.to_string())?;
    let mut command = Command::new(notify_local_binary());
    command
        .env("APP_ROLE", "api")
        .env("PORT", "0")
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    if let Some(ca_file) = ca_file {
        command.env("SSL_CERT_FILE", ca_file);
    }
    let mut child = command.spawn().map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let outcome = loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains("listening on") {
            break Ok(());
        }
        match child.try_wait() {
            Ok(Some(status)) => break Err(format!("exited with {status}: {text}")),
            Ok(None) if Instant::now() > deadline => {
                break Err(format!("neither served nor exited within 60 s: {text}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(error) => break Err(error.to_string()),
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    outcome
}

#[tokio::test]
async fn verify_full_trusts_a_configured_ca_and_checks_the_host_name() {
    let tls = TlsServer::start().await;
    let ca = tls.ca_file();
    let cases = [
        // (host, sslmode, trust the test CA, expected to connect)
        ("localhost", "verify-full", true, true),
        ("localhost", "verify-full", false, false),
        ("127.0.0.1", "verify-full", true, false), // the certificate names localhost only
        ("127.0.0.1", "verify-ca", true, true),    // verify-ca does not check the name
        ("127.0.0.1", "verify-ca", false, false),
        ("127.0.0.1", "require", false, true),
    ];
    let mut failures = Vec::new();
    for (case, (host, mode, trusted, expected)) in cases.into_iter().enumerate() {
        let url = tls.url(host, mode);
        let ca_file = trusted.then(|| ca.clone());
        let log = tls.certs.path().join(format!("notify-local-{case}.log"));
        let outcome = tokio::task::spawn_blocking(move || serves(&url, ca_file.as_deref(), &log))
            .await
            .expect("run notify-local");
        match (outcome, expected) {
            (Ok(()), true) => {}
            (Err(stderr), false) if stderr.contains("certificate verify failed") => {}
            (outcome, _) => failures.push(format!(
                "sslmode={mode} at {host} (test CA trusted: {trusted}): expected to connect: \
                 {expected}, got {outcome:?}"
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
