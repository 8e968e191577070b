//! A DCGM exporter's page (NVIDIA dcgm-exporter, default counters):
//! `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, a counter of millijoules since the driver
//! loaded, and `DCGM_FI_DEV_POWER_USAGE`, a gauge of watts, one series per GPU with its
//! `gpu` index, physical `UUID`, `Hostname` and, on a MIG GPU, the instance's
//! `GPU_I_ID`. A GPU is identified by its UUID: MIG instances (and several exporters)
//! repeat its device-level counter, which is counted once.

use crate::servermetrics::parse::Series;

/// The energy counter (mJ since the driver loaded).
pub const ENERGY: &str = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION";
/// The power gauge (W).
pub const POWER: &str = "DCGM_FI_DEV_POWER_USAGE";

/// One physical GPU's figures on one page.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuReading {
    /// The physical GPU's UUID (`GPU-…`), or `Hostname/gpu` for an exporter that
    /// sends none.
    pub id: String,
    pub gpu: Option<String>,
    pub hostname: Option<String>,
    pub energy_mj: Option<f64>,
    pub power_w: Option<f64>,
}

/// Which GPUs a plan counts: each entry an index (`gpu` label), a UUID or a
/// hostname; empty: every GPU on the page.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector(pub Vec<String>);

impl Selector {
    /// Whether the plan counts this GPU.
    pub fn chooses(&self, r: &GpuReading) -> bool {
        self.0.is_empty()
            || self.0.iter().any(|s| {
                *s == r.id
                    || Some(s.as_str()) == r.gpu.as_deref()
                    || Some(s.as_str()) == r.hostname.as_deref()
            })
    }
}

/// The GPUs `sel` chooses on `page`, each once, by host and index.
pub fn read(page: &[Series], sel: &Selector) -> Vec<GpuReading> {
    let mut out: Vec<GpuReading> = Vec::new();
    for s in page.iter().filter(|s| s.name == ENERGY || s.name == POWER) {
        // Server text: a value that is not a finite, non-negative number is no reading.
        if !s.value.is_finite() || s.value < 0.0 {
            continue;
        }
        let gpu = s.label("gpu").map(str::to_string);
        let hostname = s.label("Hostname").map(str::to_string);
        let id = match s.label("UUID") {
            Some(u) if !u.is_empty() => u.to_string(),
            _ => format!(
                "{}/{}",
                hostname.as_deref().unwrap_or("-"),
                gpu.as_deref().unwrap_or("-")
            ),
        };
        let at = match out.iter().position(|r| r.id == id) {
            Some(i) => i,
            None => {
                out.push(GpuReading {
                    id,
                    gpu,
                    hostname,
                    energy_mj: None,
                    power_w: None,
                });
                out.len() - 1
            }
        };
        let r = &mut out[at];
        // A MIG instance repeats the device's counter: the first one is the GPU's.
        if s.name == ENERGY {
            r.energy_mj.get_or_insert(s.value);
        } else {
            r.power_w.get_or_insert(s.value);
        }
    }
    out.retain(|r| sel.chooses(r));
    let index = |r: &GpuReading| r.gpu.as_deref().and_then(|g| g.parse::<u64>().ok());
    out.sort_by(|x, y| (&x.hostname, index(x), &x.id).cmp(&(&y.hostname, index(y), &y.id)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servermetrics::parse::parse;

    /// dcgm-exporter's output in its documented shape (the README's sample of
    /// `curl localhost:9400/metrics`, NVIDIA/dcgm-exporter, with the energy counter
    /// and power gauge of its default-counters.csv), two GPUs, the second a MIG GPU
    /// whose two instances repeat its device counter.
    pub const SAMPLE: &str = r#"# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:00:1E.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.90.07"} 1980
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:00:1E.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.90.07"} 412.503000
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-8f6a3c1e-2b7d-4e59-a1c0-3d9e7f215b44",pci_bus_id="00000000:00:1F.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.90.07"} 301.250000
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-8f6a3c1e-2b7d-4e59-a1c0-3d9e7f215b44",pci_bus_id="00000000:00:1F.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.90.07"} 301.250000
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:00:1E.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.90.07"} 53021487123
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",UUID="GPU-8f6a3c1e-2b7d-4e59-a1c0-3d9e7f215b44",pci_bus_id="00000000:00:1F.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.90.07"} 48812004511
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",UUID="GPU-8f6a3c1e-2b7d-4e59-a1c0-3d9e7f215b44",pci_bus_id="00000000:00:1F.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.90.07"} 48812004511
"#;

    #[test]
    fn each_physical_gpu_is_read_once_by_its_uuid() {
        let page = parse(SAMPLE).unwrap();
        let all = read(&page, &Selector::default());
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(all[0].energy_mj, Some(53021487123.0));
        assert_eq!(all[0].power_w, Some(412.503));
        assert_eq!(all[1].id, "GPU-8f6a3c1e-2b7d-4e59-a1c0-3d9e7f215b44");
        assert_eq!(all[1].energy_mj, Some(48812004511.0));
        // Chosen by index, UUID or hostname.
        let one = read(&page, &Selector(vec!["1".into()]));
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].gpu.as_deref(), Some("1"));
        let by_uuid = read(
            &page,
            &Selector(vec!["GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52".into()]),
        );
        assert_eq!(by_uuid[0].gpu.as_deref(), Some("0"));
        assert_eq!(read(&page, &Selector(vec!["node-a".into()])).len(), 2);
        assert!(read(&page, &Selector(vec!["node-b".into()])).is_empty());
    }
}
