//! summary.csv: one row per case, every metric of every case (the union of the
//! numeric keys of their results, in first-seen order).

use indexmap::IndexMap;
use serde_json::{Map, Value};

use crate::results::read::CaseFile;

/// One case's row: its id, service, status and result JSON (none when it failed).
#[derive(Debug, Clone)]
pub struct Row {
    pub id: String,
    pub service: String,
    pub status: String,
    pub result: Option<Map<String, Value>>,
}

/// Writes the rows as CSV text.
pub fn summary_csv(rows: &[Row]) -> Result<String, String> {
    let flat: Vec<IndexMap<String, String>> = rows
        .iter()
        .map(|Row { result: r, .. }| {
            let mut m = IndexMap::new();
            if let Some(r) = r {
                for (k, v) in CaseFile::new(r).columns() {
                    if let Some(cell) = cell(v) {
                        // An error kind is the server's word: escaped as a cell is.
                        m.insert(crate::escape::csv_cell(&k), cell);
                    }
                }
            }
            m
        })
        .collect();
    // The fixed columns come first; the benchplan block repeats case_id and service.
    let fixed = ["case_id", "service", "status"];
    let mut columns: Vec<String> = Vec::new();
    for m in &flat {
        for k in m.keys() {
            if !columns.contains(k) && !fixed.contains(&k.as_str()) {
                columns.push(k.clone());
            }
        }
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = fixed.iter().map(|s| s.to_string()).collect();
    header.extend(columns.iter().cloned());
    w.write_record(&header).map_err(|e| e.to_string())?;
    for (row, m) in rows.iter().zip(&flat) {
        let mut rec = vec![
            crate::escape::csv_cell(&row.id),
            crate::escape::csv_cell(&row.service),
            crate::escape::csv_cell(&row.status),
        ];
        rec.extend(
            columns
                .iter()
                .map(|c| m.get(c).cloned().unwrap_or_default()),
        );
        w.write_record(&rec).map_err(|e| e.to_string())?;
    }
    String::from_utf8(w.into_inner().map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

/// A case's timeslices as CSV (`{case}.timeslices.csv`): one row a slice, its bounds
/// and counts first, then every metric the slices hold; None without timeslices.
pub fn timeslices_csv(result: &Map<String, Value>) -> Option<Result<String, String>> {
    let slices = CaseFile::new(result).timeslices();
    if slices.is_empty() {
        return None;
    }
    let mut columns: Vec<&str> = Vec::new();
    for s in &slices {
        for k in s.keys() {
            if !columns.contains(&k.as_str()) {
                columns.push(k);
            }
        }
    }
    let write = || -> Result<String, String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&columns).map_err(|e| e.to_string())?;
        for s in &slices {
            let row: Vec<String> = columns
                .iter()
                .map(|c| s.get(*c).and_then(cell).unwrap_or_default())
                .collect();
            w.write_record(&row).map_err(|e| e.to_string())?;
        }
        String::from_utf8(w.into_inner().map_err(|e| e.to_string())?).map_err(|e| e.to_string())
    };
    Some(write())
}

fn cell(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(n.to_string()),
        // A server's text (an error, a model id) as a spreadsheet shows text.
        Value::String(s) => Some(crate::escape::csv_cell(s)),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some(String::new()),
        _ => None,
    }
}
