//! A local AWS API (moto in server mode) for tests of the AWS SDK calls. Looked for in
//! `MOTO_SERVER`, `.venv/bin`, then `PATH`; installed into `target/tools-venv` from PyPI
//! when none is found.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Moto {
    child: Child,
    pub endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_or_install() -> PathBuf {
    if let Ok(path) = std::env::var("MOTO_SERVER") {
        return PathBuf::from(path);
    }
    let root = Path::new(crate::WORKSPACE);
    for candidate in [
        root.join(".venv/bin/moto_server"),
        root.join("target/tools-venv/bin/moto_server"),
    ] {
        if candidate.is_file() {
            return candidate;
        }
    }
    if let Some(path) = std::env::var_os("PATH")
        && let Some(found) = std::env::split_paths(&path)
            .map(|d| d.join("moto_server"))
            .find(|p| p.is_file())
    {
        return found;
    }
    let venv = root.join("target/tools-venv");
    let ok = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "moto[server]"])
            .status()
            .is_ok_and(|s| s.success());
    assert!(
        ok,
        "moto_server is needed for the AWS SDK tests: pip install 'moto[server]'"
    );
    venv.join("bin/moto_server")
}

pub fn start() -> Moto {
    let binary = find_or_install();
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let child = Command::new(&binary)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "moto did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Moto {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
    }
}

/// A Scheduler client pointed at this moto server with dummy credentials.
pub fn scheduler_client(moto: &Moto) -> aws_sdk_scheduler::Client {
    let config = aws_sdk_scheduler::Config::builder()
        .behavior_version(aws_sdk_scheduler::config::BehaviorVersion::latest())
        .http_client(notify_shared::provider::aws_http::client(None))
        .endpoint_url(&moto.endpoint)
        .region(aws_sdk_scheduler::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_scheduler::config::Credentials::new(
            "testing", "testing", None, None, "tests",
        ))
        .build();
    aws_sdk_scheduler::Client::from_conf(config)
}
