//! A drawn chart ([`Chart`]) and the file name it is written under: what every chart
//! module makes.

use crate::report::view::ChartView;

/// A drawn chart: what the report says of it, and the SVG text.
#[derive(Debug, Clone)]
pub struct Chart {
    pub view: ChartView,
    pub svg: String,
}

impl Chart {
    pub(super) fn new(kind: &str, title: String, name: &str, svg: String) -> Chart {
        Chart {
            view: ChartView {
                kind: kind.into(),
                title,
                file: format!("charts/{name}.svg"),
                service: None,
                case: None,
            },
            svg,
        }
    }
}

/// The cases' services, each once, in the order they first appear (one chart each).
pub(super) fn services_of(cases: &[crate::report::view::CaseView]) -> Vec<&str> {
    let mut services: Vec<&str> = Vec::new();
    for c in cases {
        if !services.contains(&c.service.as_str()) {
            services.push(&c.service);
        }
    }
    services
}

/// A name safe in a file name (case ids and service names are already plain).
pub(super) fn file_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
