//! The page holds every figure, as well-formed SVG; PNG figures decode to more than one colour.

use super::figure::{to_png, to_svg, BoxGroup, Figure, Plot, Series};
use super::model::build;
use super::testrows::{reqresp, scenario};
use super::*;

/// Checks that `text` is well-formed XML as far as a report needs: every element closed in
/// order, attribute values quoted, `&` only in the five predefined or numeric entities, one
/// root element. Returns the number of elements.
pub(crate) fn check_xml(text: &str) -> std::result::Result<usize, String> {
    let mut stack: Vec<String> = Vec::new();
    let mut elements = 0;
    let mut roots = 0;
    let mut rest = text.trim();
    if let Some(r) = rest.strip_prefix("<?xml") {
        rest = &r[r.find("?>").ok_or("unterminated XML declaration")? + 2..];
    }
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            check_text(rest)?;
            break;
        };
        check_text(&rest[..lt])?;
        if lt > 0 && stack.is_empty() && !rest[..lt].trim().is_empty() {
            return Err("text outside the root element".into());
        }
        rest = &rest[lt..];
        if let Some(r) = rest.strip_prefix("<!--") {
            rest = &r[r.find("-->").ok_or("unterminated comment")? + 3..];
            continue;
        }
        let gt = rest.find('>').ok_or("unterminated tag")?;
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(open) if open == name.trim() => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
            continue;
        }
        let self_closing = tag.ends_with('/');
        let body = tag.trim_end_matches('/');
        let name: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || ":-_".contains(c)) {
            return Err(format!("bad element name in <{tag}>"));
        }
        check_attributes(&body[name.len()..])?;
        elements += 1;
        if stack.is_empty() {
            roots += 1;
        }
        if !self_closing {
            stack.push(name);
        }
    }
    match (stack.last(), roots) {
        (Some(open), _) => Err(format!("<{open}> never closed")),
        (None, 1) => Ok(elements),
        (None, n) => Err(format!("{n} root elements")),
    }
}

fn check_text(t: &str) -> std::result::Result<(), String> {
    let mut rest = t;
    while let Some(i) = rest.find('&') {
        rest = &rest[i + 1..];
        let end = rest.find(';').ok_or("& without ;")?;
        let ent = &rest[..end];
        let ok = matches!(ent, "amp" | "lt" | "gt" | "quot" | "apos")
            || ent.strip_prefix('#').is_some_and(|n| n.parse::<u32>().is_ok() || n.starts_with('x'));
        if !ok {
            return Err(format!("unknown entity &{ent};"));
        }
    }
    if t.contains('>') && t.contains("]]>") {
        return Err("]]> in text".into());
    }
    Ok(())
}

fn check_attributes(mut a: &str) -> std::result::Result<(), String> {
    loop {
        a = a.trim_start();
        if a.is_empty() {
            return Ok(());
        }
        let eq = a.find('=').ok_or_else(|| format!("attribute without value: {a}"))?;
        let name = a[..eq].trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(format!("bad attribute name {name:?}"));
        }
        let v = a[eq + 1..].trim_start();
        let q =
            v.chars().next().filter(|c| *c == '"' || *c == '\'').ok_or_else(|| format!("unquoted value of {name}"))?;
        let end = v[1..].find(q).ok_or_else(|| format!("unterminated value of {name}"))?;
        let value = &v[1..1 + end];
        if value.contains('<') {
            return Err(format!("< in the value of {name}"));
        }
        check_text(value)?;
        a = &v[end + 2..];
    }
}

/// The inline `<svg ...>...</svg>` documents of a page.
pub(crate) fn svgs(page: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(i) = rest.find("<svg") {
        let end = rest[i..].find("</svg>").map_or(rest.len(), |e| i + e + "</svg>".len());
        out.push(&rest[i..end]);
        rest = &rest[end..];
    }
    out
}

/// `svg` has a `<text>` element whose content is exactly `t`.
fn has_text(svg: &str, t: &str) -> bool {
    svg.contains(&format!(">\n{t}\n</text>")) || svg.contains(&format!(">{t}</text>"))
}

fn rows() -> Vec<Row> {
    let mut rows = scenario("low", 0, [8e6, 4e6], [10e6, 9e6]);
    rows.extend(scenario("low", 1, [8e6, 4e6], [7e6, 12e6]));
    rows.extend(scenario("high & <deep>", 0, [8e6, 8e6], [16e6, 4e6]));
    rows.push(reqresp("handover/0000/r0/mp-i0", 25, |i| (i != 8).then_some(if i == 9 { 600.0 } else { 16.0 })));
    rows
}

#[test]
fn xml_check_catches_mistakes() {
    assert_eq!(check_xml("<svg a=\"1\"><g><text>x &amp; y</text></g><rect/></svg>"), Ok(4));
    assert!(check_xml("<svg><g></svg>").is_err(), "misnested");
    assert!(check_xml("<svg><g>").is_err(), "unclosed");
    assert!(check_xml("<svg a=1></svg>").is_err(), "unquoted");
    assert!(check_xml("<svg>a & b</svg>").is_err(), "bare &");
    assert!(check_xml("<svg/><svg/>").is_err(), "two roots");
}

#[test]
fn page_has_every_figure_as_well_formed_svg() {
    let rows = rows();
    let m = build(&rows);
    let page = render(&rows, "results/x").unwrap();
    // Two download classes (EBen CDF, completion and goodput boxes), a request/response one
    // (delay boxes, no EBen), a CDF per variant across classes, one time series.
    let ids: Vec<&str> = m.figures.iter().map(|f| f.id.as_str()).collect();
    for want in
        ["eben-cdf-low", "eben-cdf-high-deep", "goodput-box-low", "completion-box-high-deep", "delay-handover-0000-r0"]
    {
        assert!(ids.contains(&want), "{want} missing from {ids:?}");
    }
    for f in &m.figures {
        assert_eq!(page.matches(&format!("<figure id=\"fig-{}\"", f.id)).count(), 1, "{}", f.id);
        assert!(page.contains(&format!("href=\"#fig-{}\"", f.id)), "{} not in the index", f.id);
    }
    let svgs = svgs(&page);
    assert_eq!(svgs.len(), m.figures.len());
    for (s, f) in svgs.iter().zip(&m.figures) {
        let n = check_xml(s).unwrap_or_else(|e| panic!("{}: {e}", f.id));
        assert!(n > 20, "{}: only {n} elements", f.id);
        assert!(has_text(s, &html::escape(&f.title)), "{}: title not drawn", f.id);
    }
    // Self-contained: nothing fetched from elsewhere.
    for bad in ["<script", "src=\"http", "href=\"http", "<link", "@import"] {
        assert!(!page.contains(bad), "{bad}");
    }
    assert!(!ids.contains(&"eben-cdf-handover"), "no EBen for request/response runs");
    assert!(page.contains("<table id=\"summary\"") && page.contains("<table id=\"scenarios\""));
    assert!(page.contains("high &amp; &lt;deep&gt;/0000/r0"), "scenario names are escaped");
}

#[test]
fn figures_draw_the_data() {
    let f = Figure {
        id: "t".into(),
        title: "T".into(),
        caption: String::new(),
        x_label: "x".into(),
        y_label: "y".into(),
        plot: Plot::Lines(vec![Series { label: "a".into(), points: vec![(0.0, 1.0), (1.0, 2.0), (2.0, 0.5)] }]),
    };
    let svg = to_svg(&f).unwrap();
    assert_eq!(svg.matches("<circle").count(), 3, "one marker per point");
    let boxes = Figure {
        plot: Plot::Boxes {
            groups: vec![
                BoxGroup { label: "one".into(), values: vec![1.0, 2.0, 3.0] },
                BoxGroup { label: "two".into(), values: vec![10.0, 20.0, 300.0] },
            ],
            log: true,
        },
        ..f.clone()
    };
    let svg = to_svg(&boxes).unwrap();
    check_xml(&svg).unwrap();
    assert!(has_text(&svg, "one") && has_text(&svg, "two") && has_text(&svg, "n=3"), "box labels: {svg}");
    let cdf = Figure {
        plot: Plot::Cdf {
            series: vec![Series { label: "e".into(), points: vec![(0.1, 0.0), (0.5, 0.0), (40.0, 0.0)] }],
            x_max: Some(2.0),
        },
        ..f
    };
    let svg = to_svg(&cdf).unwrap();
    assert!(has_text(&svg, "e (n=3)"), "legend with count");
    // The axis ends near the cut, not at 40.
    assert!(has_text(&svg, "2.0") && !has_text(&svg, "40.0") && !has_text(&svg, "30.0"), "{svg}");
}

#[test]
fn png_figures_are_not_blank() {
    let dir = tempfile::tempdir().unwrap();
    let m = build(&rows());
    let path = dir.path().join("cdf.png");
    to_png(&m.figures[0], &path).unwrap();
    let decoder = png::Decoder::new(std::fs::File::open(&path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), figure::SIZE);
    let px = info.color_type.samples();
    let pixels: std::collections::HashSet<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
    assert!(pixels.len() > 10, "only {} colours: blank or text-less", pixels.len());
}

#[test]
fn write_report_reads_a_results_directory() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = rows().iter().map(|r| serde_json::to_string(r).unwrap()).collect();
    std::fs::write(dir.path().join(RESULTS_JSONL), lines.join("\n") + "\n").unwrap();
    let html = default_html(dir.path());
    let pngs = dir.path().join("png");
    let s = write_report(dir.path(), &html, Some(&pngs)).unwrap();
    assert_eq!(s.rows, rows().len());
    assert_eq!(s.pngs.len(), s.figures);
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(svgs(&page).len(), s.figures);
    for p in &s.pngs {
        assert!(std::fs::metadata(p).unwrap().len() > 1000, "{}", p.display());
    }
    let missing = write_report(&dir.path().join("nope"), &html, None).unwrap_err().to_string();
    assert!(missing.contains("no such results file"), "{missing}");
    std::fs::write(dir.path().join("empty.jsonl"), "").unwrap();
    let empty = write_report(&dir.path().join("empty.jsonl"), &html, None).unwrap_err().to_string();
    assert!(empty.contains("no result rows"), "{empty}");
}
