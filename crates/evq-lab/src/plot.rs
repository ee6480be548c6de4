//! Line charts for the report: SVG (embedded in the HTML) and a PNG copy.
//!
//! Text needs a TrueType font, for the PNG and also for the SVG (plotters measures
//! text with it to lay the chart out); the DejaVu fonts Debian ships are registered
//! at run time, before the first chart is drawn. Without one the PNG is skipped.

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::OnceLock;

/// A drawn figure: SVG text for the HTML, and the PNG copy's file name.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PlotRecord {
    /// Short title.
    pub title: String,
    /// PNG file written next to the report (empty if PNG rendering failed).
    pub png: String,
    /// The SVG, embedded in the HTML (not in JSON).
    #[serde(skip)]
    pub svg: String,
}

/// One line of a chart.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// (x, y) points, x ascending.
    pub points: Vec<(f64, f64)>,
    /// evq's own line (drawn solid and thick, on top), not a peer's or a
    /// baseline's (drawn dashed and thin).
    #[serde(default)]
    pub evq: bool,
}

impl Series {
    /// One series per name in `names`, in that order: the points of the items
    /// whose `key` is that name (`point` may leave an item out).
    pub fn named<T>(
        names: &[&str],
        items: &[T],
        key: impl Fn(&T) -> &str,
        point: impl Fn(&T) -> Option<(f64, f64)>,
    ) -> Vec<Series> {
        names
            .iter()
            .map(|&name| Series {
                name: name.to_string(),
                evq: false,
                points: items
                    .iter()
                    .filter(|i| key(i) == name)
                    .filter_map(&point)
                    .collect(),
            })
            .collect()
    }

    /// [`Series::named`] for every distinct key, in order of first appearance.
    pub fn grouped<T>(
        items: &[T],
        key: impl Fn(&T) -> &str,
        point: impl Fn(&T) -> Option<(f64, f64)>,
    ) -> Vec<Series> {
        let names = distinct(items.iter().map(&key));
        Series::named(&names, items, key, point)
    }
}

/// The distinct values, in order of first appearance.
pub fn distinct<'a>(values: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// A chart the report shows, what to look at in it, and the file its PNG copy
/// goes to.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Figure {
    /// PNG file name without `.png`, unique in the report.
    pub stem: String,
    /// What the reader should look at (the figure's caption).
    pub caption: String,
    /// What to draw.
    pub chart: Chart,
}

impl Figure {
    /// A figure drawn to `stem.png`, captioned.
    pub fn new(stem: &str, caption: &str, chart: Chart) -> Figure {
        Figure {
            stem: stem.to_string(),
            caption: caption.to_string(),
            chart,
        }
    }
}

impl Chart {
    /// A chart with linear axes.
    pub fn linear(title: String, x_label: &str, y_label: &str, series: Vec<Series>) -> Chart {
        Chart {
            title,
            x_label: x_label.into(),
            y_label: y_label.into(),
            log_x: false,
            log_y: false,
            series,
        }
    }

    /// Marks the series whose name `is_evq` says is evq's (see [`Series::evq`]).
    pub fn evq_where(mut self, is_evq: impl Fn(&str) -> bool) -> Chart {
        for s in &mut self.series {
            s.evq = is_evq(&s.name);
        }
        self
    }
}

/// A chart to draw.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

fn font_registered() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        for path in FONT_PATHS {
            if let Ok(bytes) = std::fs::read(path) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

const COLORS: &[RGBColor] = &[
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    // Beyond ten series (bench-c has up to twelve): darker, still distinct.
    RGBColor(0, 0, 0),
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 0),
    RGBColor(0, 110, 70),
    RGBColor(120, 90, 0),
    RGBColor(90, 0, 120),
];

fn bounds(chart: &Chart) -> ((f64, f64), (f64, f64)) {
    let pts = chart.series.iter().flat_map(|s| s.points.iter().copied());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in pts {
        if (chart.log_x && x <= 0.0)
            || (chart.log_y && y <= 0.0)
            || !x.is_finite()
            || !y.is_finite()
        {
            continue;
        }
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return ((1.0, 10.0), (1.0, 10.0));
    }
    let pad = |lo: f64, hi: f64, log: bool| {
        if log {
            (lo / 1.5, hi * 1.5)
        } else {
            let span = (hi - lo).max(hi.abs() * 0.1).max(1e-9);
            (
                (lo - span * 0.05).min(0.0_f64.max(lo - span * 0.05)),
                hi + span * 0.1,
            )
        }
    };
    (pad(x0, x1, chart.log_x), pad(y0, y1, chart.log_y))
}

/// An axis label: whole numbers without a fraction ("1000", not "1000.0"),
/// others with as few digits as tell them apart.
fn tick(v: f64) -> String {
    if v == v.round() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let ((x0, x1), (y0, y1)) = bounds(chart);
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(&chart.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    macro_rules! body {
        ($ctx:expr) => {{
            let mut ctx = $ctx.map_err(|e| e.to_string())?;
            ctx.configure_mesh()
                .x_desc(&chart.x_label)
                .y_desc(&chart.y_label)
                .x_labels(8)
                .y_labels(8)
                .x_label_formatter(&|v| tick(*v))
                .y_label_formatter(&|v| tick(*v))
                .label_style(("sans-serif", 13))
                .draw()
                .map_err(|e| e.to_string())?;
            // Peers and baselines first, evq's lines last, on top.
            let mut order: Vec<(usize, &Series)> = chart.series.iter().enumerate().collect();
            order.sort_by_key(|(_, s)| s.evq);
            for (i, s) in order {
                let color = COLORS[i % COLORS.len()];
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|&(x, y)| (!chart.log_x || x > 0.0) && (!chart.log_y || y > 0.0))
                    .collect();
                if s.evq {
                    ctx.draw_series(LineSeries::new(pts.clone(), color.stroke_width(3)))
                        .map_err(|e| e.to_string())?
                        .label(s.name.clone())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(3))
                        });
                    ctx.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))
                        .map_err(|e| e.to_string())?;
                } else {
                    ctx.draw_series(DashedLineSeries::new(
                        pts.clone(),
                        7,
                        4,
                        color.stroke_width(2),
                    ))
                    .map_err(|e| e.to_string())?
                    .label(s.name.clone())
                    .legend(move |(x, y)| {
                        DashedPathElement::new(
                            vec![(x, y), (x + 22, y)],
                            5,
                            3,
                            color.stroke_width(2),
                        )
                    });
                    ctx.draw_series(
                        pts.into_iter()
                            .map(|p| Circle::new(p, 3, color.stroke_width(1))),
                    )
                    .map_err(|e| e.to_string())?;
                }
            }
            ctx.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 13))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| e.to_string())?;
        }};
    }
    match (chart.log_x, chart.log_y) {
        (true, true) => {
            body!(builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale()))
        }
        (true, false) => body!(builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1)),
        (false, true) => body!(builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale())),
        (false, false) => body!(builder.build_cartesian_2d(x0..x1, y0..y1)),
    }
    root.present().map_err(|e| e.to_string())
}

/// Draws `chart` as SVG (returned) and as `dir/file_stem.png`.
pub fn render(chart: &Chart, dir: &Path, file_stem: &str) -> PlotRecord {
    // Register the font first: the SVG backend measures text with it too, so the
    // first chart a process draws would otherwise fail with `FontUnavailable`.
    let have_font = font_registered();
    let mut svg = String::new();
    if let Err(e) = draw(
        SVGBackend::with_string(&mut svg, (900, 520)).into_drawing_area(),
        chart,
    ) {
        svg = format!("<p>plot failed: {}</p>", crate::html::escape(&e));
    }
    let mut png = String::new();
    if have_font {
        let name = format!("{file_stem}.png");
        let path = dir.join(&name);
        if draw(
            BitMapBackend::new(&path, (900, 520)).into_drawing_area(),
            chart,
        )
        .is_ok()
        {
            png = name;
        }
    }
    PlotRecord {
        title: chart.title.clone(),
        png,
        svg,
    }
}

#[cfg(test)]
mod tests {
    use super::tick;

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(1000.0), "1000");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(12.34), "12.3");
    }
}
