//! CPU use per core on the kernel testbeds (`cpu_cores` of the rows, issue E's per-core
//! metric): for each variant and baseline of a class, the busiest core's share and the mean
//! over all cores, one box each over the class's runs. Two boxes per group whatever the
//! number of cores, so that a 64-core host reads like this 2-core one; seed 000 §5.3 looks at
//! the same to tell whether a stack was bound by one core.

use std::collections::BTreeMap;

use crate::metrics::Row;
use crate::plan::Role;

use super::figure::{BoxGroup, Figure, Plot};
use super::groups::{group_label, Varying};
use super::model::slug;

/// The figure of class `class`, when any of its runs measured its cores.
pub fn figure(class: &str, rows: &[&Row], v: &Varying) -> Option<Figure> {
    let mut order: Vec<String> = Vec::new();
    let mut busiest: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut mean: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut sorted: Vec<&&Row> = rows.iter().collect();
    sorted.sort_by_key(|r| (r.role == Role::Multipath, r.initial_path));
    let mut cores = 0;
    for r in sorted {
        let Some(c) = r.cpu_cores.as_ref().filter(|c| !c.is_empty()) else { continue };
        cores = cores.max(c.len());
        let g = group_label(v, r);
        if !order.contains(&g) {
            order.push(g.clone());
        }
        busiest.entry(g.clone()).or_default().push(c.iter().copied().fold(0.0, f64::max) * 100.0);
        mean.entry(g).or_default().push(c.iter().sum::<f64>() / c.len() as f64 * 100.0);
    }
    if order.is_empty() {
        return None;
    }
    let groups = order
        .iter()
        .flat_map(|g| {
            [
                BoxGroup { label: format!("{g}: busiest core"), values: busiest.remove(g).unwrap_or_default() },
                BoxGroup { label: format!("{g}: all cores"), values: mean.remove(g).unwrap_or_default() },
            ]
        })
        .collect();
    Some(Figure {
        id: format!("cores-box-{}", slug(class)),
        title: format!("CPU use per core, {class}"),
        caption: format!(
            "Class {class}: busy share of the busiest core and mean over all {cores} cores of the machine that ran \
             the client, over each run (from /proc/stat; on the namespace testbed that machine also runs the \
             server and the link emulator). A busiest core near 100 % while the mean is lower: bound by one core."
        ),
        x_label: String::new(),
        y_label: "CPU use (%)".into(),
        plot: Plot::Boxes { log: false, groups },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testrows::scenario;

    #[test]
    fn each_group_gets_its_busiest_core_and_its_mean() {
        let mut rows = scenario("a", 0, [8e6, 4e6], [10e6, 9e6]);
        assert!(figure("a", &rows.iter().collect::<Vec<_>>(), &Varying::of(&rows)).is_none(), "nothing measured");
        for (k, r) in rows.iter_mut().enumerate() {
            r.cpu_cores = Some(vec![0.9, 0.1 * k as f64]);
        }
        let v = Varying::of(&rows);
        let f = figure("a", &rows.iter().collect::<Vec<_>>(), &v).unwrap();
        let Plot::Boxes { groups, .. } = f.plot else { panic!("boxes") };
        assert_eq!(groups.len(), 2 * 3, "two boxes for each of two baselines and the variant");
        assert!(groups[0].label.ends_with(": busiest core") && groups[1].label.ends_with(": all cores"));
        // Every group's busiest core is the first (0.9); the means follow the second core.
        assert!(groups.iter().step_by(2).all(|g| g.values.iter().all(|&x| x == 90.0)), "{groups:?}");
        let means: Vec<Vec<i64>> =
            groups.iter().skip(1).step_by(2).map(|g| g.values.iter().map(|m| m.round() as i64).collect()).collect();
        assert_eq!(means, vec![vec![45], vec![50], vec![55, 60]], "baselines first, then the variant's two runs");
        assert!(f.caption.contains("2 cores"), "{}", f.caption);
    }
}
