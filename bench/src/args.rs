//! Command-line options of `notify-bench`.

use anyhow::{Context, bail};

pub const FULL_SIZE: u64 = 100_000;

pub const HELP: &str = "\
notify-bench: the Notify Queue benchmark (protocol: docs/BENCHMARKS.md)

USAGE: cargo run --release --bin notify-bench -- [OPTIONS]

OPTIONS:
  --size N          notifications per scenario (default 100000); every scenario scales
                    with it: B1/B2/B5/B8/B9/B11 use N (B9: campaign recipients), B4 N/100 (at least 20), B3 runs
                    15 s x N/100000 (at least 1 s); M1 stores 1,000,000 from N = 100000
                    up, and 10 x N below (20,000 for the smoke test's --size 2000)
  --runs R          repetitions; figures are medians with min-max (default 3)
  --only B2,B6,...  run only these scenarios, of B1-B11 and M1 (B6 and B7 also need
                    the one-worker drain; B11 is shown beside B2 and B8 when they run)
                    B10, the soak with retention, runs only when named here: its ten
                    rounds of N (1,000,000 notifications at the full size) took 9.2 min
                    for one run on a busy 2-core machine, nearly half an hour for the
                    three runs of a full run, so a full run leaves it out; at
                    --size 2000 (10 x 2,000) it takes 20 s, but its 5 s retention
                    then spans several rounds, so only the full size tests its targets
  --workers 1,2,4   worker-process counts for B2 (default 1,2,4)
  --b11-concurrency K
                    WORKER_CONCURRENCY of the B11 worker (default 64)
  --b1-inflight K   batch calls in flight during intake (default 2)
  --env KEY=VALUE   extra environment for every notify-local process (repeatable),
                    e.g. --env WORKER_BATCH_SIZE=500
  --no-build        do not run `cargo build --release --bins --workspace` first
  --no-docs         never rewrite docs/BENCHMARKS.md and docs/benchmarks/latency.svg
  -h, --help        this text

docs/BENCHMARKS.md, docs/benchmarks/latency.svg and docs/benchmarks/results.json are
rewritten only by a complete run at the full size (--size 100000, no --only, no --env,
no --workers, no --b11-concurrency) without --no-docs. Raw figures always go to
target/bench/results.json, and any other run's report to target/bench/BENCHMARKS.md.

DATABASE_URL: when set, each scenario creates and drops its own database
notify_bench_<uuid> on that server; otherwise a private PostgreSQL is started under
target/ and removed on exit.

CI smoke test (about a minute once built):
  cargo run --release --bin notify-bench -- --size 2000 --runs 1 --no-docs
";

#[derive(Debug, Clone)]
pub struct Options {
    pub size: u64,
    pub runs: u32,
    pub only: Option<Vec<String>>,
    pub workers: Vec<usize>,
    pub workers_given: bool,
    pub b1_inflight: usize,
    pub b11_concurrency: usize,
    pub b11_concurrency_given: bool,
    pub extra_env: Vec<(String, String)>,
    pub build: bool,
    pub no_docs: bool,
}

pub const ALL: [&str; 12] = [
    "B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8", "B9", "B10", "B11", "M1",
];

/// What runs without `--only`: all but B10, the soak (see `--help`).
pub const DEFAULT: [&str; 11] = [
    "B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8", "B9", "B11", "M1",
];

/// Notifications M1 stores at the full size: the figure its target names.
pub const METRICS_ROWS: u64 = 1_000_000;

impl Options {
    /// `None` when help was asked for.
    pub fn parse(args: &[String]) -> anyhow::Result<Option<Self>> {
        let mut options = Options {
            size: FULL_SIZE,
            runs: 3,
            only: None,
            workers: vec![1, 2, 4],
            workers_given: false,
            b1_inflight: 2,
            b11_concurrency: 64,
            b11_concurrency_given: false,
            extra_env: Vec::new(),
            build: true,
            no_docs: false,
        };
        let mut rest = args.iter();
        while let Some(flag) = rest.next() {
            let mut value = |name: &str| {
                rest.next()
                    .cloned()
                    .with_context(|| format!("{name} needs a value (see --help)"))
            };
            match flag.as_str() {
                "-h" | "--help" => return Ok(None),
                "--size" => {
                    options.size = value("--size")?
                        .replace(['_', ','], "")
                        .parse()
                        .context("--size must be a positive integer")?;
                    if options.size < 100 {
                        bail!("--size must be at least 100");
                    }
                }
                "--runs" => {
                    options.runs = value("--runs")?
                        .parse()
                        .context("--runs must be a positive integer")?;
                    if options.runs == 0 {
                        bail!("--runs must be at least 1");
                    }
                }
                "--only" => {
                    let list: Vec<String> = value("--only")?
                        .split(',')
                        .map(|s| s.trim().to_uppercase())
                        .filter(|s| !s.is_empty())
                        .collect();
                    for id in &list {
                        if !ALL.contains(&id.as_str()) {
                            bail!("--only: unknown scenario {id} (B1 to B11, M1)");
                        }
                    }
                    options.only = Some(list);
                }
                "--workers" => {
                    let list = value("--workers")?
                        .split(',')
                        .map(|s| s.trim().parse::<usize>())
                        .collect::<Result<Vec<_>, _>>()
                        .context("--workers takes a list like 1,2,4")?;
                    if list.is_empty() || list.iter().any(|&w| w == 0 || w > 16) {
                        bail!("--workers: counts from 1 to 16");
                    }
                    options.workers = list;
                    options.workers_given = true;
                }
                "--b1-inflight" => {
                    options.b1_inflight = value("--b1-inflight")?
                        .parse()
                        .context("--b1-inflight must be a positive integer")?;
                    if options.b1_inflight == 0 || options.b1_inflight > 64 {
                        bail!("--b1-inflight: from 1 to 64");
                    }
                }
                "--b11-concurrency" => {
                    options.b11_concurrency = value("--b11-concurrency")?
                        .parse()
                        .context("--b11-concurrency must be a positive integer")?;
                    if options.b11_concurrency == 0 || options.b11_concurrency > 1000 {
                        bail!("--b11-concurrency: from 1 to 1000");
                    }
                    options.b11_concurrency_given = true;
                }
                "--env" => {
                    let pair = value("--env")?;
                    let (key, val) = pair
                        .split_once('=')
                        .with_context(|| format!("--env takes KEY=VALUE (got {pair:?})"))?;
                    options.extra_env.push((key.to_string(), val.to_string()));
                }
                "--no-build" => options.build = false,
                "--no-docs" => options.no_docs = true,
                other => bail!("unknown argument {other:?} (see --help)"),
            }
        }
        Ok(Some(options))
    }

    pub fn selected(&self, id: &str) -> bool {
        match &self.only {
            Some(only) => only.iter().any(|o| o == id),
            None => DEFAULT.contains(&id),
        }
    }

    /// Why the docs are not rewritten by this invocation, if they are not.
    pub fn docs_refusal(&self) -> Option<String> {
        if self.no_docs {
            Some("--no-docs".into())
        } else if self.size != FULL_SIZE {
            Some(format!(
                "--size {} is not the full size {FULL_SIZE}",
                self.size
            ))
        } else if self.only.is_some() {
            Some("--only runs a subset".into())
        } else if !self.extra_env.is_empty() {
            Some("--env changes the configuration".into())
        } else if self.workers_given {
            Some("--workers changes the B2 passes".into())
        } else if self.b11_concurrency_given {
            Some("--b11-concurrency changes the B11 worker".into())
        } else {
            None
        }
    }

    /// Notifications M1 stores: 1,000,000 from the full size up; below it, scaled down
    /// in proportion (10 × `--size`) so that the smoke test stays short.
    pub fn metrics_rows(&self) -> u64 {
        if self.size >= FULL_SIZE {
            METRICS_ROWS
        } else {
            METRICS_ROWS * self.size / FULL_SIZE
        }
    }

    /// Notifications in B1, B2, B5, B8 and B11.
    pub fn bulk(&self) -> u64 {
        self.size
    }

    /// Notifications per round of B10: N, ten rounds (1,000,000 in all at the full size).
    pub fn soak_round(&self) -> u64 {
        self.size
    }

    /// Notifications in B4 (1,000 at full size).
    pub fn idle_count(&self) -> u64 {
        (self.size / 100).max(20)
    }

    /// B3 measuring time (15 s at full size).
    pub fn single_duration(&self) -> std::time::Duration {
        let seconds = 15.0 * self.size as f64 / FULL_SIZE as f64;
        std::time::Duration::from_secs_f64(seconds.clamp(1.0, 60.0))
    }
}

#[cfg(test)]
mod tests {
    use super::Options;

    fn parse(args: &[&str]) -> Options {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Options::parse(&args)
            .expect("valid options")
            .expect("not help")
    }

    #[test]
    fn m1_stores_a_million_from_the_full_size_up_and_scales_below() {
        assert_eq!(parse(&[]).metrics_rows(), 1_000_000);
        assert_eq!(parse(&["--size", "250000"]).metrics_rows(), 1_000_000);
        assert_eq!(parse(&["--size", "2000"]).metrics_rows(), 20_000);
    }

    #[test]
    fn the_soak_runs_only_when_named_in_ten_rounds_of_the_size() {
        assert!(!parse(&[]).selected("B10") && parse(&[]).selected("M1"));
        let options = parse(&["--only", "b10", "--size", "2000"]);
        assert!(options.selected("B10") && !options.selected("B2"));
        assert_eq!(options.soak_round(), 2000);
        assert_eq!(parse(&[]).soak_round() * 10, 1_000_000);
    }

    #[test]
    fn the_new_scenarios_are_selectable_and_b11_concurrency_keeps_the_docs() {
        let options = parse(&["--only", "m1,B11", "--b11-concurrency", "32"]);
        assert!(options.selected("M1") && options.selected("B11") && !options.selected("B2"));
        assert_eq!(options.b11_concurrency, 32);
        let options = parse(&["--b11-concurrency", "64"]);
        assert!(options.docs_refusal().is_some());
        assert!(parse(&[]).docs_refusal().is_none());
    }
}
