//! The report as one self-contained HTML page: styles inline, every figure an inline SVG, no
//! script and nothing loaded from elsewhere.

use std::fmt::Write;

use super::figure::{to_svg, Figure};
use super::model::{ReportModel, ScenarioTable, SummaryLine};

/// `s` with `&`, `<`, `>` and `"` escaped for HTML text and attributes.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222;max-width:1400px}\
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;font-size:0.85em;margin:1em 0}\
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f0f0f0}\
td.l,th.l{text-align:left}td.bad{background:#fde0dc}td.good{background:#e3f4e1}\
figure{margin:1.5em 0}figcaption{font-size:0.9em;max-width:900px;color:#444}\
.scroll{max-height:40em;overflow:auto}";

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "–".into(), f)
}

fn summary_table(o: &mut String, lines: &[SummaryLine]) {
    o.push_str(
        "<table id=\"summary\"><tr><th class=\"l\">class</th><th class=\"l\">variant</th><th>runs</th>\
<th>failed</th><th>with EBen</th><th>EBen ≥ 0</th><th>EBen ≥ 0, handshake credited</th><th>median EBen</th><th>worst EBen</th>\
<th class=\"l\">worst run</th><th>median completion (s)</th><th>median goodput (Mbit/s)</th></tr>\n",
    );
    for l in lines {
        let (worst, run) =
            l.eben_worst.as_ref().map_or(("–".into(), String::new()), |(e, id)| (format!("{e:.3}"), id.clone()));
        let _ = writeln!(
            o,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
<td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(&l.class),
            escape(&l.variant),
            l.runs,
            l.failed,
            l.eben_n,
            opt(l.eben_nonneg, |s| format!("{:.1} %", 100.0 * s)),
            opt(l.eben_nonneg_credited, |s| format!("{:.1} %", 100.0 * s)),
            opt(l.eben_median, |e| format!("{e:.3}")),
            worst,
            escape(&run),
            opt(l.completion_median_s, |c| format!("{c:.2}")),
            opt(l.goodput_median_bps, |g| format!("{:.2}", g / 1e6)),
        );
    }
    o.push_str("</table>\n");
    o.push_str(
        "<p id=\"handicap\">\"Handshake credited\": each multipath run's completion time less what the \
protocol's rules alone make it pay against the best single path when it started on another one (the Finished after \
1.5 round trips and three 1200-byte datagrams of the initial path, RFC 9001 §5.7, then one round trip of the best \
path to validate the client's address, RFC 10069 §3.1; less the baseline's 1.5 round trips and three datagrams of \
the best path). A what-if, not a result: it separates the runs the handshake explains from the rest.</p>\n",
    );
}

fn scenario_table(o: &mut String, t: &ScenarioTable) {
    o.push_str(
        "<div class=\"scroll\"><table id=\"scenarios\"><tr><th class=\"l\">scenario</th><th class=\"l\">links</th>",
    );
    for c in &t.baseline_columns {
        let _ = write!(o, "<th>{} (Mbit/s)</th>", escape(c));
    }
    for c in &t.columns {
        let _ = write!(o, "<th>{} (Mbit/s, EBen)</th>", escape(c));
    }
    o.push_str("</tr>\n");
    for l in &t.lines {
        let _ = write!(
            o,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td>",
            escape(&l.id),
            l.links.iter().map(|x| escape(x)).collect::<Vec<_>>().join("<br>")
        );
        for b in &l.baselines {
            let _ = write!(o, "<td>{}</td>", opt(*b, |g| format!("{:.2}", g / 1e6)));
        }
        for c in &l.cells {
            match c {
                None => o.push_str("<td>–</td>"),
                Some((g, e, ok)) => {
                    let class = match e {
                        _ if !ok => " class=\"bad\"",
                        Some(e) if *e < 0.0 => " class=\"bad\"",
                        Some(_) => " class=\"good\"",
                        None => "",
                    };
                    let flag = if *ok { "" } else { " (failed)" };
                    let _ = write!(o, "<td{class}>{:.2}, {}{flag}</td>", g / 1e6, opt(*e, |e| format!("{e:.3}")));
                }
            }
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table></div>\n");
}

fn figure(o: &mut String, f: &Figure) -> Result<(), String> {
    let svg = to_svg(f)?;
    let _ = writeln!(
        o,
        "<figure id=\"fig-{}\" class=\"figure\">\n{svg}\n<figcaption>{}</figcaption></figure>",
        escape(&f.id),
        escape(&f.caption)
    );
    Ok(())
}

/// The page of `m`, with `source` (the results read) named at the top.
pub fn page(m: &ReportModel, source: &str) -> Result<String, String> {
    let mut o = String::new();
    let title = format!("mpq lab report: {}", m.title);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        escape(&title)
    );
    let _ = writeln!(
        o,
        "<h1>{}</h1><p>{} runs from <code>{}</code>; {} failed (did not complete, wrong data or error). \
Made by <code>mpq lab report</code> {}.</p>",
        escape(&title),
        m.rows,
        escape(source),
        m.failures.len(),
        env!("CARGO_PKG_VERSION")
    );
    if m.repetitions > 1 {
        let _ = writeln!(
            o,
            "<p id=\"repetitions\">Each scenario ran {} times (repetitions, each with its own seed): figures and \
tables show per-scenario medians over the repetitions (goodput, completion time) and the EBen of the median runs \
(the multipath run's median goodput against each baseline's, as seed 002 analysed its repetitions); a run counts \
as failed if any repetition failed, and the failed runs below list every repetition.</p>",
            m.repetitions
        );
    }
    o.push_str("<h2>Summary per class and variant</h2>\n");
    o.push_str(
        "<p>EBen is seed 002's experimental aggregation benefit of a multipath run over the single-path \
baselines of its scenario: 0 is as good as the best path alone, 1 the sum of the paths.</p>\n",
    );
    summary_table(&mut o, &m.summary);
    o.push_str("<h2>Figures</h2>\n<ul>");
    for f in &m.figures {
        let _ = write!(o, "<li><a href=\"#fig-{}\">{}</a></li>", escape(&f.id), escape(&f.title));
    }
    o.push_str("</ul>\n");
    for n in &m.notes {
        let _ = writeln!(o, "<p><em>{}</em></p>", escape(n));
    }
    for f in &m.figures {
        figure(&mut o, f)?;
    }
    if !m.failures.is_empty() {
        o.push_str("<h2>Failed runs</h2><div class=\"scroll\"><table id=\"failures\"><tr><th class=\"l\">run</th><th class=\"l\">why</th></tr>\n");
        for (id, why) in &m.failures {
            let _ = writeln!(o, "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>", escape(id), escape(why));
        }
        o.push_str("</table></div>\n");
    }
    o.push_str("<h2>Scenarios</h2>\n");
    scenario_table(&mut o, &m.scenarios);
    o.push_str("</body></html>\n");
    Ok(o)
}
