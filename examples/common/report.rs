//! The showdown's figures as a JSON file (`--json FILE`) and as one SVG bar
//! chart per table (`--svg DIR`), so a README or a dashboard can show them.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::Path;

/// One contender's figures in one table.
pub struct Record {
    pub name: String,
    /// The table's headline figure, in `Table::unit`.
    pub value: f64,
    pub cpu_ns_per_op: Option<f64>,
    pub p50_ns: Option<f64>,
    pub p99_ns: Option<f64>,
    pub max_ns: Option<f64>,
    /// CPU time the host took from the machine's vCPUs during the
    /// contender's rounds (every round, every vCPU): a max wait of that
    /// order may be the host's, not the lock's.
    pub stolen_ns: Option<f64>,
    /// Every round's headline figure, in the order the rounds ran (empty
    /// where the figure is one measurement): a ratio between two
    /// contenders can be taken round by round, each round's contenders
    /// having run back to back.
    pub rounds: Vec<f64>,
}

/// One workload.
pub struct Table {
    pub title: String,
    pub unit: &'static str,
    pub higher_is_better: bool,
    pub rows: Vec<Record>,
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.3}"),
        _ => "null".into(),
    }
}

/// Every table, with the machine line, as one JSON document.
pub fn json(machine: &str, tables: &[Table]) -> String {
    let mut out = format!("{{\n  \"machine\": {},\n  \"tables\": [\n", json_str(machine));
    for (i, t) in tables.iter().enumerate() {
        let _ = write!(
            out,
            "    {{\n      \"title\": {},\n      \"unit\": {},\n      \"higher_is_better\": {},\n      \"rows\": [\n",
            json_str(&t.title),
            json_str(t.unit),
            t.higher_is_better
        );
        for (j, r) in t.rows.iter().enumerate() {
            let _ = writeln!(
                out,
                "        {{\"name\": {}, \"value\": {}, \"cpu_ns_per_op\": {}, \"p50_ns\": {}, \"p99_ns\": {}, \"max_ns\": {}, \"stolen_ns\": {}, \"rounds\": [{}]}}{}",
                json_str(&r.name),
                json_num(Some(r.value)),
                json_num(r.cpu_ns_per_op),
                json_num(r.p50_ns),
                json_num(r.p99_ns),
                json_num(r.max_ns),
                json_num(r.stolen_ns),
                r.rounds.iter().map(|v| json_num(Some(*v))).collect::<Vec<_>>().join(", "),
                if j + 1 < t.rows.len() { "," } else { "" }
            );
        }
        let _ = write!(out, "      ]\n    }}{}\n", if i + 1 < tables.len() { "," } else { "" });
    }
    out.push_str("  ]\n}\n");
    out
}

/// A file name for a table: its title in kebab case, at most 60 characters.
pub fn slug(title: &str) -> String {
    let mut s = String::new();
    for c in title.chars().take(60) {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    s.trim_matches('-').to_string()
}

/// A horizontal bar chart of one table's headline figure; hybrid-sync's
/// bars stand out.
pub fn svg(table: &Table, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;

    let n = table.rows.len();
    let max = table.rows.iter().map(|r| r.value).fold(0.0, f64::max).max(1e-9);
    let height = 70 + 36 * n as u32;
    let root = SVGBackend::new(path, (760, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let better = if table.higher_is_better { "higher is better" } else { "lower is better" };
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{} ({better})", table.title), ("sans-serif", 14))
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(100)
        .build_cartesian_2d(0.0..max * 1.18, (0..n).into_segmented())?;
    let names: Vec<String> = table.rows.iter().map(|r| r.name.clone()).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) if *i < n => names[n - 1 - *i].clone(),
            _ => String::new(),
        })
        .x_label_formatter(&|v| format_value(*v, table.unit))
        .x_desc(table.unit)
        .draw()?;
    let ours = |name: &str| name.starts_with("hybrid") || name.starts_with("LockRef");
    // The first row on top: segment n-1 is the highest.
    let at = |i: usize| n - 1 - i;
    chart.draw_series(table.rows.iter().enumerate().map(|(i, r)| {
        let i = at(i);
        let color = if ours(&r.name) { RGBColor(214, 96, 40) } else { RGBColor(70, 110, 170) };
        let mut bar =
            Rectangle::new([(0.0, SegmentValue::Exact(i)), (r.value, SegmentValue::Exact(i + 1))], color.filled());
        bar.set_margin(6, 6, 0, 0);
        bar
    }))?;
    chart.draw_series(table.rows.iter().enumerate().map(|(i, r)| {
        let label = format_value(r.value, table.unit);
        Text::new(label, (r.value + max * 0.01, SegmentValue::CenterOf(at(i))), ("sans-serif", 12))
    }))?;
    root.present()?;
    Ok(())
}

fn format_value(v: f64, unit: &str) -> String {
    if unit.starts_with("ns") {
        format!("{v:.1}")
    } else if v == 0.0 {
        "0".into()
    } else if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0} k", v / 1e3)
    } else {
        format!("{v:.2}")
    }
}
