//! The figures an invocation keeps, serialised as `results.json`: every run's raw
//! figures, the settings, the machine and the summary rows.

use serde::Serialize;

use crate::scenarios::campaign::CampaignIsolation;
use crate::scenarios::drain::{DrainPass, StartTimes};
use crate::scenarios::floor::Floor;
use crate::scenarios::intake::Single;
use crate::scenarios::latency::{Idle, Isolation};
use crate::scenarios::metrics::MetricsScale;
use crate::scenarios::real::RealDrain;
use crate::scenarios::soak::Soak;
use crate::sys::Machine;

/// The figures of one run: every scenario selected, once.
#[derive(Debug, Clone, Serialize, Default)]
pub struct RunResult {
    pub run: u32,
    pub drains: Vec<DrainPass>,
    pub single: Option<Single>,
    pub idle: Option<Idle>,
    pub isolation: Option<Isolation>,
    pub start: Option<StartTimes>,
    pub floors: Vec<Floor>,
    /// B9: a campaign paced through SES beside transactional traffic.
    pub campaign: Option<CampaignIsolation>,
    /// B11: the one-worker drain through SES (the stand-in).
    pub real_provider: Option<RealDrain>,
    /// M1: `GET /metrics` over 1,000,000 stored notifications.
    pub metrics: Option<MetricsScale>,
    /// B10: ten rounds drained under retention of a few seconds.
    pub soak: Option<Soak>,
}

impl RunResult {
    pub fn drain(&self, workers: usize) -> Option<&DrainPass> {
        self.drains.iter().find(|d| d.workers == workers)
    }

    pub fn floor(&self, batch: i64, connections: usize, admission: bool) -> Option<&Floor> {
        self.floors.iter().find(|f| {
            f.variant.batch == batch
                && f.variant.connections == connections
                && f.variant.admission == admission
        })
    }

    /// The best bare floor at the worker's batch size (100), over one and two connections.
    pub fn best_floor_100(&self) -> Option<f64> {
        [1, 2]
            .iter()
            .filter_map(|&c| self.floor(100, c, false).map(|f| f.per_s))
            .fold(None, |best: Option<f64>, v| {
                Some(best.map_or(v, |b| b.max(v)))
            })
    }

    /// B2 with one worker ÷ the best bare floor at the worker's batch size (100).
    pub fn drain_over_floor(&self) -> Option<f64> {
        let drain = self.drain(1)?.drain_per_s;
        Some(drain / self.best_floor_100()?)
    }
}

/// One line of the summary: a scenario's headline against its target and notifyd's.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub id: &'static str,
    pub what: String,
    pub result: String,
    pub target: &'static str,
    pub meets: Option<bool>,
    pub notifyd_2_cores: &'static str,
    pub notifyd_published: &'static str,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// What this invocation was asked to do.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub size: u64,
    pub runs: u32,
    pub intake_calls_in_flight: usize,
    pub worker_counts: Vec<usize>,
    pub notify_local_env: Vec<(String, String)>,
}

/// Everything one invocation measured: `results.json`, and the source of the table and
/// of docs/BENCHMARKS.md.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub command: String,
    pub machine: Machine,
    pub settings: Settings,
    pub binary_sizes: Vec<(String, Option<u64>)>,
    pub elapsed_s: f64,
    pub rows: Vec<Row>,
    pub runs: Vec<RunResult>,
}
