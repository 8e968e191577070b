//! NVML on the machine that runs benchplan (a single-node benchmark beside its GPUs):
//! `libnvidia-ml.so.1` is loaded at run time with `dlopen`, so the binary runs, and
//! says why there is no energy, where there is no NVIDIA driver. Each device's
//! `nvmlDeviceGetTotalEnergyConsumption` (mJ since the driver loaded, Volta and later)
//! and `nvmlDeviceGetPowerUsage` (mW) become the same readings a DCGM page gives, by
//! the device's UUID.

use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong, c_void};

use super::dcgm::GpuReading;

/// The library as loaded: its handle and the device handles, by UUID.
pub struct Nvml {
    energy: unsafe extern "C" fn(*mut c_void, *mut c_ulonglong) -> c_int,
    power: unsafe extern "C" fn(*mut c_void, *mut c_uint) -> c_int,
    devices: Vec<(String, usize, *mut c_void)>,
}

impl std::fmt::Debug for Nvml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.devices.iter().map(|d| d.0.as_str()).collect();
        f.debug_struct("Nvml").field("devices", &ids).finish()
    }
}

// NVML's calls are thread-safe (its documentation); the handles are opaque.
unsafe impl Send for Nvml {}
unsafe impl Sync for Nvml {}

/// The library's name on Linux.
pub const LIBRARY: &str = "libnvidia-ml.so.1";

/// Looks `name` up in the loaded library.
unsafe fn symbol(lib: *mut c_void, name: &CStr) -> Result<*mut c_void, String> {
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        Err(format!("{LIBRARY} has no {}", name.to_string_lossy()))
    } else {
        Ok(p)
    }
}

impl Nvml {
    /// Loads NVML and lists the devices; an error says why not (no driver, no
    /// device), for the case's warnings.
    pub fn open() -> Result<Nvml, String> {
        let name = std::ffi::CString::new(LIBRARY).expect("no NUL");
        // SAFETY: dlopen with a valid C string; a null handle is checked.
        let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return Err(format!(
                "NVML: {LIBRARY} cannot be loaded (no NVIDIA driver on this machine): no energy from NVML"
            ));
        }
        type Init = unsafe extern "C" fn() -> c_int;
        type Count = unsafe extern "C" fn(*mut c_uint) -> c_int;
        type ByIndex = unsafe extern "C" fn(c_uint, *mut *mut c_void) -> c_int;
        type Uuid = unsafe extern "C" fn(*mut c_void, *mut c_char, c_uint) -> c_int;
        // SAFETY: each symbol is NVML's documented function of this signature.
        unsafe {
            let init: Init = std::mem::transmute(symbol(lib, c"nvmlInit_v2")?);
            let count: Count = std::mem::transmute(symbol(lib, c"nvmlDeviceGetCount_v2")?);
            let by_index: ByIndex =
                std::mem::transmute(symbol(lib, c"nvmlDeviceGetHandleByIndex_v2")?);
            let uuid: Uuid = std::mem::transmute(symbol(lib, c"nvmlDeviceGetUUID")?);
            let energy = std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(*mut c_void, *mut c_ulonglong) -> c_int,
            >(symbol(lib, c"nvmlDeviceGetTotalEnergyConsumption")?);
            let power = std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(*mut c_void, *mut c_uint) -> c_int,
            >(symbol(lib, c"nvmlDeviceGetPowerUsage")?);
            let rc = init();
            if rc != 0 {
                return Err(format!("NVML: nvmlInit failed (error {rc})"));
            }
            let mut n: c_uint = 0;
            if count(&mut n) != 0 || n == 0 {
                return Err("NVML: no GPU on this machine".into());
            }
            let mut devices = Vec::new();
            for i in 0..n {
                let mut h: *mut c_void = std::ptr::null_mut();
                if by_index(i, &mut h) != 0 {
                    continue;
                }
                let mut buf = [0 as c_char; 96];
                let id = if uuid(h, buf.as_mut_ptr(), buf.len() as c_uint) == 0 {
                    CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
                } else {
                    format!("nvml/{i}")
                };
                devices.push((id, i as usize, h));
            }
            Ok(Nvml {
                energy,
                power,
                devices,
            })
        }
    }

    /// Every device's counter and power now.
    pub fn read(&self) -> Vec<GpuReading> {
        self.devices
            .iter()
            .map(|(id, i, h)| {
                let (mut mj, mut mw): (c_ulonglong, c_uint) = (0, 0);
                // SAFETY: a handle NVML gave, and out-pointers to locals.
                let (e, p) = unsafe { ((self.energy)(*h, &mut mj), (self.power)(*h, &mut mw)) };
                GpuReading {
                    id: id.clone(),
                    gpu: Some(i.to_string()),
                    hostname: None,
                    energy_mj: (e == 0).then_some(mj as f64),
                    power_w: (p == 0).then_some(f64::from(mw) / 1e3),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    /// Where the driver is missing (this project's CI), loading says so; where it is
    /// there, every device has a UUID.
    #[test]
    fn nvml_without_a_driver_says_so() {
        match super::Nvml::open() {
            Err(e) => assert!(e.starts_with("NVML: "), "{e}"),
            Ok(n) => assert!(n.read().iter().all(|g| !g.id.is_empty())),
        }
    }
}
