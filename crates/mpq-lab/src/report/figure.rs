//! Figures of the report as data ([`Figure`]) and their drawing with plotters, to an SVG
//! string (for the page) or a PNG file (bitmap backend). Text goes through ab_glyph with an
//! embedded font (DejaVu Sans), so no system font library is involved.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::stats::{box_stats, ecdf_steps};

/// Width and height of every figure, pixels.
pub const SIZE: (u32, u32) = (900, 480);

/// A named series of points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Values (CDF) or (x, y) points (time series, `y` of each `x`).
    pub points: Vec<(f64, f64)>,
}

/// A labelled group of values of a box plot.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxGroup {
    /// Axis label of the box.
    pub label: String,
    /// The values.
    pub values: Vec<f64>,
}

/// What a figure shows.
#[derive(Debug, Clone, PartialEq)]
pub enum Plot {
    /// Empirical CDFs, one line per series; each point's `x` is a value (`y` unused).
    Cdf {
        /// The series.
        series: Vec<Series>,
        /// Right end of the value axis: larger values are drawn at it (the CDF still counts
        /// them), so that a few outliers do not squeeze the rest.
        x_max: Option<f64>,
    },
    /// One box per group; `log` draws the value axis on a log scale.
    Boxes {
        /// The groups, left to right.
        groups: Vec<BoxGroup>,
        /// Log-scale value axis (all values must then be above 0; others are dropped).
        log: bool,
    },
    /// Lines with markers through `(x, y)` points, one per series.
    Lines(Vec<Series>),
}

/// One figure of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Unique ID in the page (letters, digits, `-`); also the PNG file name.
    pub id: String,
    /// Title drawn above the plot.
    pub title: String,
    /// Sentence under the figure on the page.
    pub caption: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// The plot.
    pub plot: Plot,
}

/// Registers the embedded font as plotters' `sans-serif` once.
fn fonts() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .map_err(|_| "the embedded DejaVu Sans font could not be loaded".to_string())
    })
    .clone()
}

/// Line colour of series `i`.
fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    C[i % C.len()]
}

type DrawResult<T> = Result<T, String>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("drawing failed: {e:?}")
}

/// `(lo, hi)` of `values` widened so that the range is never empty, with 5 % margins.
fn padded(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) =
        values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let span = if hi > lo { hi - lo } else { lo.abs().max(1.0) };
    (lo - 0.05 * span, hi + 0.05 * span)
}

/// Grid, tick labels and axis descriptions of `chart`; without `x`, no vertical lines nor x
/// labels. (A macro: plotters' bounds on `configure_mesh` differ per coordinate type.)
macro_rules! mesh {
    ($chart:expr, $fig:expr, $x:expr) => {{
        let mut m = $chart.configure_mesh();
        m.label_style(("sans-serif", 15)).axis_desc_style(("sans-serif", 16)).y_desc(&$fig.y_label);
        if $x {
            m.x_desc(&$fig.x_label);
        } else {
            m.disable_x_mesh().x_labels(0);
        }
        m.draw().map_err(err)
    }};
}

/// Draws `fig` onto `root` (any plotters backend).
pub fn draw<DB: DrawingBackend>(fig: &Figure, root: &DrawingArea<DB, Shift>) -> DrawResult<()> {
    fonts()?;
    root.fill(&WHITE).map_err(err)?;
    match &fig.plot {
        Plot::Cdf { series, x_max } => draw_cdf(fig, root, series, *x_max),
        Plot::Lines(series) => draw_lines(fig, root, series),
        Plot::Boxes { groups, log } => draw_boxes(fig, root, groups, *log),
    }?;
    root.present().map_err(err)
}

fn draw_cdf<DB: DrawingBackend>(
    fig: &Figure,
    root: &DrawingArea<DB, Shift>,
    series: &[Series],
    x_max: Option<f64>,
) -> DrawResult<()> {
    let clip = |x: f64| x_max.map_or(x, |m| x.min(m));
    let (lo, hi) = padded(series.iter().flat_map(|s| s.points.iter().map(|p| clip(p.0))));
    let mut chart = ChartBuilder::on(root)
        .caption(&fig.title, ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(lo..hi, 0.0..1.0)
        .map_err(err)?;
    mesh!(chart, fig, true)?;
    for (i, s) in series.iter().enumerate() {
        let values: Vec<f64> = s.points.iter().map(|p| clip(p.0)).collect();
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(ecdf_steps(&values), c.stroke_width(2)))
            .map_err(err)?
            .label(format!("{} (n={})", s.label, values.len()))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

fn draw_lines<DB: DrawingBackend>(fig: &Figure, root: &DrawingArea<DB, Shift>, series: &[Series]) -> DrawResult<()> {
    let (x0, x1) = padded(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let (_, y1) = padded(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let mut chart = ChartBuilder::on(root)
        .caption(&fig.title, ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, 0.0..y1.max(1.0))
        .map_err(err)?;
    mesh!(chart, fig, true)?;
    for (i, s) in series.iter().enumerate() {
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled()))).map_err(err)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    pos: SeriesLabelPosition,
) -> DrawResult<()> {
    chart
        .configure_series_labels()
        .position(pos)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

fn draw_boxes<DB: DrawingBackend>(
    fig: &Figure,
    root: &DrawingArea<DB, Shift>,
    groups: &[BoxGroup],
    log: bool,
) -> DrawResult<()> {
    let stats: Vec<_> = groups
        .iter()
        .map(|g| {
            let v: Vec<f64> = g.values.iter().copied().filter(|&x| x.is_finite() && (!log || x > 0.0)).collect();
            box_stats(&v)
        })
        .collect();
    let all = stats.iter().flatten().flat_map(|b| [b.min, b.max]);
    let n = groups.len().max(1) as f64;
    let caption = (fig.title.as_str(), ("sans-serif", 24));
    let (root_chart, label_area) = root.split_vertically(SIZE.1 - 72);
    let xs = 0.0..n;
    if log {
        let (lo, hi) = all.fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
        let (lo, hi) = if lo.is_finite() && hi > 0.0 { (lo / 1.3, hi * 1.3) } else { (0.1, 10.0) };
        let mut chart = ChartBuilder::on(&root_chart)
            .caption(caption.0, caption.1)
            .margin(12)
            .y_label_area_size(70)
            .x_label_area_size(5)
            .build_cartesian_2d(xs, (lo..hi).log_scale())
            .map_err(err)?;
        mesh!(chart, fig, false)?;
        boxes(&mut chart, &stats)?;
        box_labels(&chart, &label_area, groups)
    } else {
        let (lo, hi) = padded(all);
        let mut chart = ChartBuilder::on(&root_chart)
            .caption(caption.0, caption.1)
            .margin(12)
            .y_label_area_size(70)
            .x_label_area_size(5)
            .build_cartesian_2d(xs, lo..hi)
            .map_err(err)?;
        mesh!(chart, fig, false)?;
        boxes(&mut chart, &stats)?;
        box_labels(&chart, &label_area, groups)
    }
}

/// Boxes, medians and whiskers at x = i + 0.5.
fn boxes<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    stats: &[Option<super::stats::BoxStats>],
) -> DrawResult<()> {
    for (i, b) in stats.iter().enumerate() {
        let Some(b) = b else { continue };
        let (x, c) = (i as f64 + 0.5, colour(i));
        let (l, r) = (x - 0.3, x + 0.3);
        chart.draw_series([Rectangle::new([(l, b.q1), (r, b.q3)], c.mix(0.3).filled())]).map_err(err)?;
        chart.draw_series([Rectangle::new([(l, b.q1), (r, b.q3)], c.stroke_width(2))]).map_err(err)?;
        chart
            .draw_series([PathElement::new(vec![(l, b.median), (r, b.median)], BLACK.stroke_width(3))])
            .map_err(err)?;
        for (from, to) in [(b.q3, b.high), (b.q1, b.low)] {
            chart.draw_series([PathElement::new(vec![(x, from), (x, to)], c.stroke_width(1))]).map_err(err)?;
            chart
                .draw_series([PathElement::new(vec![(x - 0.12, to), (x + 0.12, to)], c.stroke_width(1))])
                .map_err(err)?;
        }
        // Values beyond the whiskers, as seen.
        if b.max > b.high || b.min < b.low {
            let outliers = [b.min, b.max].into_iter().filter(|&v| v < b.low || v > b.high);
            chart.draw_series(outliers.map(|v| Circle::new((x, v), 3, c.stroke_width(1)))).map_err(err)?;
        }
    }
    Ok(())
}

/// The group labels (with their counts) under the boxes.
fn box_labels<DB: DrawingBackend, Y: Ranged>(
    chart: &ChartContext<'_, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    area: &DrawingArea<DB, Shift>,
    groups: &[BoxGroup],
) -> DrawResult<()> {
    let style = TextStyle::from(("sans-serif", 14).into_font()).pos(plotters::style::text_anchor::Pos::new(
        plotters::style::text_anchor::HPos::Center,
        plotters::style::text_anchor::VPos::Top,
    ));
    let left = area.get_base_pixel().0;
    for (i, g) in groups.iter().enumerate() {
        let (px, _) = chart.backend_coord(&(i as f64 + 0.5, chart.y_range().start));
        let x = px - left;
        // One line per ` / `-separated part, then the count: narrow boxes stay readable.
        let lines = g.label.split(" / ").map(str::to_owned).chain([format!("n={}", g.values.len())]);
        for (k, line) in lines.enumerate() {
            area.draw(&Text::new(line, (x, 4 + 16 * k as i32), style.clone())).map_err(err)?;
        }
    }
    Ok(())
}

/// The figure as an SVG document.
pub fn to_svg(fig: &Figure) -> DrawResult<String> {
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, SIZE).into_drawing_area();
        draw(fig, &root)?;
    }
    Ok(s)
}

/// The figure as a PNG file at `path`.
pub fn to_png(fig: &Figure, path: &Path) -> DrawResult<()> {
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    draw(fig, &root)
}
