//! TPOT against speculative-decoding acceptance, per request: one point per request
//! (`benchplan.speculative_decoding.per_request`), one colour per case, one chart per
//! service. Under speculative decoding a slow request is most often one whose drafts
//! were rejected; this shows whether that is so here.

use plotters::prelude::*;
use serde_json::{Map, Value};

use super::chart::{Chart, file_part, services_of};
use super::style::{Entry, FONT, Marker, PLOT_WIDTH, SIZE, color, err, legend, mesh, range};
use crate::report::view::CaseView;
use crate::results::read::CaseFile;

pub fn draw<'a>(
    cases: &[CaseView],
    result: &dyn Fn(&str) -> Option<&'a Map<String, Value>>,
) -> Vec<Chart> {
    let services = services_of(cases);
    let mut out = Vec::new();
    for svc in services {
        let series: Vec<(String, Vec<(f64, f64)>)> = cases
            .iter()
            .filter(|c| c.service == svc)
            .filter_map(|c| {
                let pts = CaseFile::new(result(&c.id)?).acceptance_points();
                (!pts.is_empty()).then(|| (c.label.clone(), pts))
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        let title = format!("TPOT against draft acceptance, service {svc}");
        match svg(&title, &series) {
            Ok(s) => {
                let mut ch = Chart::new(
                    "acceptance",
                    title,
                    &format!("acceptance_{}", file_part(svc)),
                    s,
                );
                ch.view.service = Some(svc.to_string());
                out.push(ch);
            }
            Err(e) => eprintln!("warning: cannot draw the acceptance of {svc}: {e}"),
        }
    }
    out
}

fn svg(title: &str, series: &[(String, Vec<(f64, f64)>)]) -> Result<String, String> {
    let ys = range(series.iter().flat_map(|s| s.1.iter().map(|p| p.1)), true);
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, side) = root.split_horizontally(PLOT_WIDTH);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..100.0, ys)
            .map_err(err)?;
        mesh(&mut chart, "acceptance rate (%)", "TPOT (ms)", false)?;
        for (i, (_, pts)) in series.iter().enumerate() {
            chart
                .draw_series(
                    pts.iter()
                        .map(|p| Circle::new(*p, 3, color(i).mix(0.7).filled())),
                )
                .map_err(err)?;
        }
        let entries: Vec<Entry> = series
            .iter()
            .enumerate()
            .map(|(i, (name, _))| Entry {
                name: name.clone(),
                color: color(i),
                dashed: false,
                marker: Marker::Circle,
            })
            .collect();
        legend(&side, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(text)
}
