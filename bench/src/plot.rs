//! The delivery-latency plot (B4 and B5 HIGH): the samples it shows, drawn with
//! plotters' SVG backend.

use std::path::Path;

use anyhow::anyhow;
use plotters::prelude::*;

use crate::report::RunResult;
use crate::stats;

/// Latency samples of all runs, for the plot.
pub fn series(runs: &[RunResult]) -> Vec<(String, Vec<f64>)> {
    let b4: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.idle.as_ref())
        .flat_map(|i| i.samples_ms.iter().copied())
        .collect();
    let b5: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.isolation.as_ref())
        .flat_map(|i| i.high_samples_ms.iter().copied())
        .collect();
    let mut series = Vec::new();
    if !b4.is_empty() {
        series.push(("B4 idle worker, 100/s".to_string(), b4));
    }
    if !b5.is_empty() {
        series.push(("B5 HIGH during LOW drain".to_string(), b5));
    }
    series
}

/// Cumulative distribution of each sample set (latencies in ms), log-scaled time axis.
pub fn latency_cdf(path: &Path, series: &[(String, Vec<f64>)]) -> anyhow::Result<()> {
    let all: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| v.is_finite())
        .collect();
    anyhow::ensure!(!all.is_empty(), "no latency samples to plot");
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min).max(0.1) * 0.8;
    let hi = all.iter().copied().fold(0.0, f64::max).max(lo * 10.0) * 1.25;
    let colors = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
    ];

    let err = |e: DrawingAreaErrorKind<std::io::Error>| anyhow!("plot: {e:?}");
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Delivery latency: sent_at − due (cumulative)",
            ("sans-serif", 22),
        )
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0f64..100.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("latency (ms, log scale)")
        .y_desc("% delivered within")
        .x_label_formatter(&|v| {
            if *v >= 10.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        })
        .y_label_formatter(&|v| format!("{v:.0}%"))
        .draw()
        .map_err(err)?;
    for (i, (name, samples)) in series.iter().enumerate() {
        let sorted = stats::sorted(samples.iter().copied().filter(|v| v.is_finite()).collect());
        if sorted.is_empty() {
            continue;
        }
        let n = sorted.len() as f64;
        let points: Vec<(f64, f64)> = sorted
            .iter()
            .enumerate()
            .map(|(k, &v)| (v.max(lo), (k + 1) as f64 * 100.0 / n))
            .collect();
        let color = colors[i % colors.len()];
        let p99 = stats::percentile(&sorted, 0.99);
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(err)?
            .label(format!(
                "{name}: n = {}, p50 {}, p99 {}",
                sorted.len(),
                stats::ms(stats::percentile(&sorted, 0.5)),
                stats::ms(p99)
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        // The p99 as a vertical tick.
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(p99.max(lo), 0.0), (p99.max(lo), 99.0)],
                color.mix(0.4),
            )))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
