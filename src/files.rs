//! The floor's file helpers, for every room that writes: files are written whole or
//! not at all (into a temporary file beside the target, flushed, then renamed over
//! it), lines are appended whole, a folder is checked writable before a run, and a
//! name is kept inside its folder.

use std::io::Write;
use std::path::Path;

/// A JSON value as benchplan writes its files: pretty, ending in a newline.
pub fn json_bytes(v: &serde_json::Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("JSON serialises");
    b.push(b'\n');
    b
}

/// Writes `bytes` to `path` atomically (same-folder temporary file, then rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("result");
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    // The last line behind the structural redaction: no registered secret is written.
    let bytes = crate::redact::scrub_registered(bytes);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Whether a file can be written in `dir` (created if missing): a small file is
/// written there and removed.
pub fn check_writable(dir: &Path) -> std::io::Result<()> {
    if !dir.as_os_str().is_empty() {
        std::fs::create_dir_all(dir)?;
    }
    let probe = dir.join(format!(".benchplan-write-check-{}", std::process::id()));
    let r = std::fs::write(&probe, b"benchplan");
    let _ = std::fs::remove_file(&probe);
    r
}

/// Checks that a name from the user (a label, a result file name) stays inside the
/// folder it is joined to: relative, no `..` component, no NUL.
pub fn inside(name: &str, what: &str) -> Result<(), String> {
    let p = Path::new(name);
    let bad = name.is_empty()
        || name.contains('\0')
        || p.is_absolute()
        || name.starts_with('/')
        || name.starts_with('\\')
        || p.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        });
    if bad {
        return Err(format!(
            "{what} `{}` would write outside the results folder; give a plain relative name (no `..`, no leading `/`)",
            name.escape_debug()
        ));
    }
    Ok(())
}

/// vLLM's `--append-result`: a newline before the object when the file is not empty.
pub fn append_json_line(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let bytes = crate::redact::scrub_registered(bytes);
    // One write call: a kill between a separator and its object cannot happen.
    let mut all = Vec::with_capacity(bytes.len() + 1);
    if f.metadata()?.len() > 0 {
        all.push(b'\n');
    }
    all.extend_from_slice(&bytes);
    f.write_all(&all)?;
    f.sync_all()
}

/// Appends `text` (whole lines, each ending in a newline) to a text file, created with
/// its folder if missing; a file another tool left without its last newline gets one
/// first, so lines never run together. The lines go out in one `write` call, so a
/// kill cannot tear one mid-append (a full disk still can: readers skip a torn line).
/// Synced before returning. (For a file whose lines are separated, not ended, see
/// [`append_json_line`].)
pub fn append_lines(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    let len = f.metadata()?.len();
    let text = crate::redact::scrub_registered(text.as_bytes());
    let mut all = Vec::with_capacity(text.len() + 1);
    if len > 0 {
        let mut last = [0u8; 1];
        f.seek(SeekFrom::Start(len - 1))?;
        f.read_exact(&mut last)?;
        if last[0] != b'\n' {
            all.push(b'\n');
        }
    }
    all.extend_from_slice(&text);
    f.write_all(&all)?;
    f.sync_all()
}

/// Points `latest` beside `dir` at it (a relative symlink), for baselines such as
/// `bench_results/batch/latest`. A `latest` that is a real file or folder (not
/// benchplan's link) is left alone, and the warning that says so is returned.
pub fn point_latest(dir: &Path) -> Option<String> {
    let (parent, name) = (dir.parent()?, dir.file_name()?);
    let latest = parent.join("latest");
    match std::fs::symlink_metadata(&latest) {
        Ok(m) if !m.file_type().is_symlink() => {
            return Some(format!(
                "{} is a real {}, not benchplan's link, so it does not point at this run; remove it to let `latest` follow the newest run",
                latest.display(),
                if m.is_dir() { "folder" } else { "file" }
            ));
        }
        Ok(_) => {
            let _ = std::fs::remove_file(&latest);
        }
        Err(_) => {}
    }
    #[cfg(unix)]
    let _ = std::os::unix::fs::symlink(name, &latest);
    #[cfg(not(unix))]
    let _ = name;
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_inside_their_folder() {
        for ok in ["result.json", "sub/result.json", "./r.json", "a..b.json"] {
            assert!(inside(ok, "x").is_ok(), "{ok}");
        }
        for bad in [
            "../r.json",
            "/etc/passwd",
            "a/../../r",
            "",
            "r\0.json",
            "..",
            "sub/..",
        ] {
            assert!(inside(bad, "x").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn atomic_write_replaces_whole_files_and_appends_lines() {
        let dir = std::env::temp_dir().join(format!("benchplan-write-{}", std::process::id()));
        let p = dir.join("sub/r.json");
        write_atomic(&p, b"{\"a\":1}").unwrap();
        write_atomic(&p, b"{\"a\":2}").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"a\":2}");
        assert_eq!(
            std::fs::read_dir(dir.join("sub")).unwrap().count(),
            1,
            "no temporary file left behind"
        );
        let l = dir.join("lines.json");
        append_json_line(&l, b"{}").unwrap();
        append_json_line(&l, b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&l).unwrap(), "{}\n{}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
