//! Small server-rendered SVG charts: stacked bars per time bucket and a
//! two-line latency chart. No script needed to draw them; colours come
//! from the stylesheet (`.series-<name>`), so the legend and bars agree.

use leptos::prelude::*;

const W: f64 = 720.0;
const H: f64 = 170.0;
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 18.0;
const TOP: f64 = 8.0;

/// One stacked series: name (for the CSS class and tooltips) and a value
/// per bucket.
#[derive(Clone)]
pub struct Series {
    pub name: String,
    pub label: String,
    pub points: Vec<i64>,
}

/// A round axis maximum at or above `max`.
fn nice_max(max: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|v| *v >= max).unwrap_or(10.0 * mag)
}

fn fmt(v: f64) -> String {
    if v >= 10.0 || v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v:.1}") }
}

#[component]
fn Axis(max: f64, unit: &'static str, left_label: String, right_label: String) -> impl IntoView {
    let plot_h = H - TOP - BOTTOM;
    view! {
        <line class="axis" x1=LEFT y1=H - BOTTOM x2=W y2=H - BOTTOM/>
        <line class="grid" x1=LEFT y1=TOP x2=W y2=TOP/>
        <line class="grid" x1=LEFT y1=TOP + plot_h / 2.0 x2=W y2=TOP + plot_h / 2.0/>
        <text class="tick" x=LEFT - 6.0 y=TOP + 4.0 text-anchor="end">{format!("{}{unit}", fmt(max))}</text>
        <text class="tick" x=LEFT - 6.0 y=TOP + plot_h / 2.0 + 4.0 text-anchor="end">
            {format!("{}{unit}", fmt(max / 2.0))}
        </text>
        <text class="tick" x=LEFT - 6.0 y=H - BOTTOM + 4.0 text-anchor="end">"0"</text>
        <text class="tick" x=LEFT y=H - 3.0>{left_label}</text>
        <text class="tick" x=W y=H - 3.0 text-anchor="end">{right_label}</text>
    }
}

/// Stacked bars, one column per bucket. `labels` names each bucket for
/// its tooltip.
#[component]
pub fn StackedBars(
    series: Vec<Series>,
    labels: Vec<String>,
    #[prop(into)] title: String,
    #[prop(into)] left_label: String,
    #[prop(into)] right_label: String,
) -> impl IntoView {
    let n = labels.len().max(1);
    let totals: Vec<i64> = (0..n).map(|i| series.iter().map(|s| s.points.get(i).copied().unwrap_or(0)).sum()).collect();
    let max = nice_max(totals.iter().copied().max().unwrap_or(0) as f64);
    let plot_h = H - TOP - BOTTOM;
    let slot = (W - LEFT) / n as f64;
    let bar_w = (slot * 0.8).max(1.0);
    let columns = (0..n)
        .filter(|i| totals[*i] > 0)
        .map(|i| {
            let x = LEFT + i as f64 * slot + (slot - bar_w) / 2.0;
            let mut y = H - BOTTOM;
            let tip = series
                .iter()
                .filter_map(|s| s.points.get(i).filter(|v| **v > 0).map(|v| format!("{} {v}", s.label)))
                .collect::<Vec<_>>()
                .join(", ");
            let rects = series
                .iter()
                .filter_map(|s| {
                    let v = s.points.get(i).copied().unwrap_or(0);
                    (v > 0).then(|| {
                        let h = v as f64 / max * plot_h;
                        y -= h;
                        view! { <rect class=format!("series-{}", s.name) x=x y=y width=bar_w height=h/> }
                    })
                })
                .collect_view();
            view! { <g><title>{format!("{}: {tip}", labels[i])}</title>{rects}</g> }
        })
        .collect_view();
    let label = title.clone();
    view! {
        <svg class="chart" viewBox=format!("0 0 {W} {H}") role="img" aria-label=label>
            <title>{title}</title>
            <Axis max unit="" left_label right_label/>
            {columns}
        </svg>
    }
}

/// p50 and p99 latency per bucket (gaps where nothing arrived).
#[component]
pub fn LatencyLines(
    p50: Vec<Option<f64>>,
    p99: Vec<Option<f64>>,
    #[prop(into)] left_label: String,
    #[prop(into)] right_label: String,
) -> impl IntoView {
    let n = p50.len().max(1);
    let max = nice_max(p99.iter().chain(p50.iter()).flatten().fold(0.0f64, |a, b| a.max(*b)));
    let plot_h = H - TOP - BOTTOM;
    let slot = (W - LEFT) / n as f64;
    let path = |pts: &[Option<f64>]| {
        let mut d = String::new();
        let mut pen_down = false;
        for (i, p) in pts.iter().enumerate() {
            match p {
                Some(v) => {
                    let x = LEFT + (i as f64 + 0.5) * slot;
                    let y = H - BOTTOM - v / max * plot_h;
                    d.push_str(&format!("{}{x:.1},{y:.1} ", if pen_down { "L" } else { "M" }));
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        d
    };
    let dots = |pts: &[Option<f64>], class: &'static str| {
        pts.iter()
            .enumerate()
            .filter_map(|(i, p)| p.map(|v| (i, v)))
            .map(|(i, v)| {
                view! { <circle class=class cx=LEFT + (i as f64 + 0.5) * slot cy=H - BOTTOM - v / max * plot_h r="2"/> }
            })
            .collect_view()
    };
    view! {
        <svg class="chart" viewBox=format!("0 0 {W} {H}") role="img" aria-label="Latency p50 and p99">
            <title>"Latency p50 and p99 (ms)"</title>
            <Axis max unit=" ms" left_label right_label/>
            <path class="line-p99" d=path(&p99)/>
            <path class="line-p50" d=path(&p50)/>
            {dots(&p99, "dot-p99")}
            {dots(&p50, "dot-p50")}
        </svg>
    }
}

/// A horizontal share bar for a reason table.
#[component]
pub fn ShareBar(value: i64, max: i64, #[prop(into)] class: String) -> impl IntoView {
    let w = if max > 0 { 120.0 * value as f64 / max as f64 } else { 0.0 };
    view! {
        <svg class="share" viewBox="0 0 120 10" width="120" height="10" aria-hidden="true">
            <rect class=class x="0" y="0" width=w height="10" rx="2"/>
        </svg>
    }
}

#[cfg(test)]
mod tests {
    use super::nice_max;

    #[test]
    fn axis_maxima_are_round() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(3.0), 5.0);
        assert_eq!(nice_max(17.0), 20.0);
        assert_eq!(nice_max(230.0), 250.0);
        assert_eq!(nice_max(1000.0), 1000.0);
    }
}
