//! Percentiles, medians, latency summaries, number formats and the progress lines on
//! stderr.

use std::time::{Duration, Instant};

use serde::Serialize;

/// Nearest-rank percentile of sorted values (`q` in 0..=1).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

/// Percentiles of one set of latency samples (ms).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    pub count: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    pub fn of(sorted: &[f64]) -> Latency {
        Latency {
            count: sorted.len(),
            p50_ms: percentile(sorted, 0.5),
            p90_ms: percentile(sorted, 0.9),
            p99_ms: percentile(sorted, 0.99),
            max_ms: sorted.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// Median with min and max over runs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Spread {
    pub fn of(values: &[f64]) -> Option<Spread> {
        let values: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if values.is_empty() {
            return None;
        }
        let s = sorted(values);
        let n = s.len();
        let median = if !n.is_multiple_of(2) {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: s[0],
            max: s[n - 1],
            n,
        })
    }

    /// `median (min–max)` with `fmt` applied to each.
    pub fn show(&self, fmt: impl Fn(f64) -> String) -> String {
        if self.n <= 1 || fmt(self.min) == fmt(self.max) {
            fmt(self.median)
        } else {
            format!("{} ({}–{})", fmt(self.median), fmt(self.min), fmt(self.max))
        }
    }
}

/// Thousands separators: 12,345.
pub fn int(value: f64) -> String {
    if !value.is_finite() {
        return "—".into();
    }
    let rounded = value.round() as i64;
    let digits = rounded.abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if rounded < 0 { format!("-{out}") } else { out }
}

pub fn ms(value: f64) -> String {
    if !value.is_finite() {
        "—".into()
    } else if value >= 100.0 {
        format!("{value:.0} ms")
    } else if value >= 10.0 {
        format!("{value:.1} ms")
    } else {
        format!("{value:.2} ms")
    }
}

pub fn mb(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1_000_000.0)
}

/// Prints `[label] done/total  rate/s  ETA` on stderr at most once a second.
pub struct Progress {
    label: String,
    total: u64,
    started: Instant,
    last_print: Option<Instant>,
    unit: &'static str,
}

impl Progress {
    pub fn new(label: impl Into<String>, total: u64, unit: &'static str) -> Self {
        let label = label.into();
        eprintln!("[{label}] started");
        Progress {
            label,
            total,
            started: Instant::now(),
            last_print: None,
            unit,
        }
    }

    pub fn update(&mut self, done: u64) {
        let now = Instant::now();
        if self
            .last_print
            .is_some_and(|at| now.duration_since(at) < Duration::from_secs(1))
        {
            return;
        }
        self.last_print = Some(now);
        let elapsed = self.started.elapsed().as_secs_f64();
        let rate = if elapsed > 0.0 {
            done as f64 / elapsed
        } else {
            0.0
        };
        let eta = if rate > 0.0 && self.total > done {
            format!("ETA {:.1} s", (self.total - done) as f64 / rate)
        } else {
            String::new()
        };
        let count = if self.total == 0 {
            int(done as f64)
        } else {
            format!("{}/{}", int(done as f64), int(self.total as f64))
        };
        eprintln!(
            "[{}] {count} {}  {}/s  {:.1} s  {eta}",
            self.label,
            self.unit,
            int(rate),
            elapsed
        );
    }

    pub fn finish(&self, summary: &str) {
        eprintln!(
            "[{}] done in {:.1} s: {summary}",
            self.label,
            self.started.elapsed().as_secs_f64()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v = sorted((1..=100).map(f64::from).collect());
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 1.0), 100.0);
        assert_eq!(int(1234567.4), "1,234,567");
        let s = Spread::of(&[3.0, 1.0, 2.0]).map(|s| s.median);
        assert_eq!(s, Some(2.0));
    }
}
