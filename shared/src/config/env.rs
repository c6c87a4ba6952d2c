//! Reading the environment: each getter parses one variable and, when it is malformed,
//! records a problem and returns the default, so every problem is reported at once.

use std::collections::HashMap;

pub(super) struct Env {
    vars: HashMap<String, String>,
    pub(super) problems: Vec<String>,
}

impl Env {
    pub(super) fn new(vars: HashMap<String, String>) -> Self {
        Env {
            vars,
            problems: Vec::new(),
        }
    }

    /// A non-empty string value; an empty variable counts as unset.
    pub(super) fn string(&self, name: &str) -> Option<String> {
        self.vars
            .get(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// `true` or `false`; `None` when unset.
    pub(super) fn flag(&mut self, name: &str) -> Option<bool> {
        match self.string(name).as_deref() {
            None => None,
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(other) => {
                self.problems
                    .push(format!("{name} must be true or false (got {other:?})"));
                None
            }
        }
    }

    pub(super) fn number(&mut self, name: &str, default: u64, min: u64, max: u64) -> u64 {
        let Some(raw) = self.string(name) else {
            return default;
        };
        match raw.parse::<u64>() {
            Ok(value) if (min..=max).contains(&value) => value,
            _ => {
                self.problems.push(format!(
                    "{name} must be an integer from {min} to {max} (got {raw:?})"
                ));
                default
            }
        }
    }

    /// A number ≥ 0 (fractions allowed), at most a million.
    pub(super) fn positive(&mut self, name: &str, default: f64) -> f64 {
        let Some(raw) = self.string(name) else {
            return default;
        };
        match raw.parse::<f64>() {
            Ok(value) if (0.0..=1_000_000.0).contains(&value) => value,
            _ => {
                self.problems.push(format!(
                    "{name} must be a number from 0 to 1000000 (got {raw:?})"
                ));
                default
            }
        }
    }

    pub(super) fn fraction(&mut self, name: &str, default: f64) -> f64 {
        let Some(raw) = self.string(name) else {
            return default;
        };
        match raw.parse::<f64>() {
            Ok(value) if (0.0..=1.0).contains(&value) => value,
            _ => {
                self.problems
                    .push(format!("{name} must be a number from 0 to 1 (got {raw:?})"));
                default
            }
        }
    }
}
