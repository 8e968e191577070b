//! The DCGM series as a Prometheus server holds them (the Kubernetes case: the
//! exporter is scraped by Prometheus and not reachable from the client). After a case,
//! the raw samples of `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` and
//! `DCGM_FI_DEV_POWER_USAGE` over the case are asked for with one range-vector query
//! each (`/api/v1/query`, `NAME[Ns]` at the case's end), and become the same readings a
//! page read gives, stamped with each sample's own time. Prometheus scrapes on its own
//! clock, so the query is repeated (up to `wait`) until every GPU has a sample at or
//! after the case's end: the window's edges then lie between samples.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use super::dcgm::{self, GpuReading, Selector};
use super::readings::Readings;
use super::window::Reading;

/// `/api/v1/query`'s answer, the parts read.
#[derive(Debug, Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Data {
    #[serde(default)]
    result: Vec<Matrix>,
}

#[derive(Debug, Deserialize)]
struct Matrix {
    metric: std::collections::BTreeMap<String, String>,
    /// `[unix seconds, "value"]`.
    #[serde(default)]
    values: Vec<(f64, String)>,
}

/// Seconds since the Unix epoch of an instant, by the wall clock now.
pub fn unix_of(at: Instant) -> f64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    now - at.elapsed().as_secs_f64()
}

/// The readings of the GPUs `sel` chooses, from `base` (a Prometheus server's URL),
/// over the case that started at `start_unix` and ended at `end_unix`.
pub async fn read(
    client: &reqwest::Client,
    headers: &reqwest::header::HeaderMap,
    base: &str,
    sel: &Selector,
    (start_unix, end_unix): (f64, f64),
    wait: Duration,
) -> Readings {
    let mut out = Readings {
        kind: "prometheus",
        url: crate::redact::url(base),
        ..Readings::default()
    };
    let until = Instant::now() + wait;
    loop {
        let now_unix = unix_of(Instant::now());
        // From a little before the start (a sample before the window's first edge).
        let range = (now_unix - start_unix + wait.as_secs_f64()).ceil().max(1.0) as u64;
        let mut readings = Readings {
            kind: "prometheus",
            url: out.url.clone(),
            ..Readings::default()
        };
        for name in [dcgm::ENERGY, dcgm::POWER] {
            let q = format!("{name}[{range}s]");
            match query(client, headers, base, &q, now_unix).await {
                Ok(series) => add(&mut readings, name, series, sel, start_unix),
                Err(e) => {
                    readings.failed += 1;
                    readings.first_error.get_or_insert(e);
                }
            }
        }
        let end_t = end_unix - start_unix;
        let covered = !readings.gpus.is_empty()
            && readings
                .gpus
                .iter()
                .all(|(_, rs)| rs.last().is_some_and(|r| r.t >= end_t));
        out = readings;
        if covered || Instant::now() >= until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    out
}

async fn query(
    client: &reqwest::Client,
    headers: &reqwest::header::HeaderMap,
    base: &str,
    q: &str,
    at: f64,
) -> Result<Vec<Matrix>, String> {
    let url = format!("{}/api/v1/query", base.trim_end_matches('/'));
    let shown = crate::redact::url(&url);
    let mut u = reqwest::Url::parse(&url).map_err(|e| format!("{shown}: {e}"))?;
    u.query_pairs_mut()
        .append_pair("query", q)
        .append_pair("time", &format!("{at:.3}"));
    let resp = client
        .get(u)
        .headers(headers.clone())
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| format!("GET {shown}: {e}"))?;
    let status = resp.status();
    let body = resp
        .bytes()
        .await
        .map_err(|e| format!("GET {shown}: {e}"))?;
    let a: Answer = serde_json::from_slice(&body)
        .map_err(|e| format!("GET {shown}: HTTP {status}, not Prometheus's answer ({e})"))?;
    if a.status != "success" {
        return Err(format!(
            "GET {shown}: {}",
            a.error.unwrap_or_else(|| a.status.clone())
        ));
    }
    Ok(a.data.map(|d| d.result).unwrap_or_default())
}

/// Adds series of `name` to `readings`, one physical GPU once (MIG instances repeat
/// their GPU's series), times from `start_unix`.
fn add(readings: &mut Readings, name: &str, series: Vec<Matrix>, sel: &Selector, start_unix: f64) {
    for m in series {
        let label = |k: &str| m.metric.get(k).cloned();
        let gpu = GpuReading {
            id: label("UUID").filter(|u| !u.is_empty()).unwrap_or_else(|| {
                format!(
                    "{}/{}",
                    label("Hostname").unwrap_or_else(|| "-".into()),
                    label("gpu").unwrap_or_else(|| "-".into())
                )
            }),
            gpu: label("gpu"),
            hostname: label("Hostname"),
            energy_mj: None,
            power_w: None,
        };
        if !sel.chooses(&gpu) {
            continue;
        }
        let at = match readings.gpus.iter().position(|(g, _)| g.id == gpu.id) {
            Some(i) => i,
            None => {
                readings.gpus.push((gpu, Vec::new()));
                readings.gpus.len() - 1
            }
        };
        let rs = &mut readings.gpus[at].1;
        for (ts, v) in m.values {
            let Ok(v) = v.parse::<f64>() else { continue };
            if !v.is_finite() || v < 0.0 {
                continue;
            }
            let t = ts - start_unix;
            // One reading per time: a MIG instance's repeat fills nothing new.
            let i = match rs.iter().position(|r| (r.t - t).abs() < 1e-9) {
                Some(i) => i,
                None => {
                    rs.push(Reading {
                        t,
                        energy_mj: None,
                        power_w: None,
                    });
                    rs.len() - 1
                }
            };
            let slot = if name == dcgm::ENERGY {
                &mut rs[i].energy_mj
            } else {
                &mut rs[i].power_w
            };
            slot.get_or_insert(v);
        }
        rs.sort_by(|a, b| a.t.total_cmp(&b.t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prometheus's answer to a range-vector query (its HTTP API's documented shape),
    /// two MIG instances of one GPU repeating its counter, and a GPU left out.
    #[test]
    fn a_range_vector_becomes_one_gpus_readings() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
          {"metric":{"__name__":"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION","gpu":"1","UUID":"GPU-b","Hostname":"node-a","GPU_I_ID":"1"},"values":[[1000.0,"5000"],[1001.0,"5300"]]},
          {"metric":{"__name__":"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION","gpu":"1","UUID":"GPU-b","Hostname":"node-a","GPU_I_ID":"2"},"values":[[1000.0,"5000"],[1001.0,"5300"]]},
          {"metric":{"__name__":"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION","gpu":"0","UUID":"GPU-c","Hostname":"node-b"},"values":[[1000.0,"NaN"]]}
        ]}}"#;
        let a: Answer = serde_json::from_str(body).unwrap();
        let mut r = Readings::default();
        add(
            &mut r,
            dcgm::ENERGY,
            a.data.unwrap().result,
            &Selector(vec!["node-a".into()]),
            999.5,
        );
        assert_eq!(r.gpus.len(), 1, "{r:?}");
        let rs = &r.gpus[0].1;
        assert_eq!(rs.len(), 2);
        assert_eq!((rs[0].t, rs[0].energy_mj), (0.5, Some(5000.0)));
        let e = crate::energy::window::over(rs, 0.5, 1.5).unwrap();
        assert!((e.mean_watts - 0.3).abs() < 1e-9, "{e:?}");
    }
}
