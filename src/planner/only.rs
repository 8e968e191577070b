//! `run --only PATTERN`: the cases a rerun picks. A pattern is a service name or a glob
//! over case ids (`*` any run of characters, `?` one); a case is picked when any
//! pattern matches it.

use super::Case;

/// Whether `case` is picked by `patterns`.
pub fn picks(patterns: &[String], case: &Case) -> bool {
    patterns
        .iter()
        .any(|p| *p == case.service || glob(p.as_bytes(), case.id.as_bytes()))
}

/// `pattern` matches all of `text` (`*` and `?`), iteratively with one backtrack point.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// The error for patterns that pick nothing: the services and a few ids to choose from.
pub fn none_picked(patterns: &[String], cases: &[Case]) -> String {
    let mut services: Vec<&str> = cases.iter().map(|c| c.service.as_str()).collect();
    services.dedup();
    let ids: Vec<&str> = cases.iter().take(3).map(|c| c.id.as_str()).collect();
    format!(
        "--only {} picks no case; give a service name ({}) or a glob over case ids (such as `{}*`; `benchplan cases PLAN` lists them: {}, …)",
        patterns.join(" "),
        services.join(", "),
        services.first().copied().unwrap_or("service"),
        ids.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_ids() {
        let g = |p: &str, t: &str| glob(p.as_bytes(), t.as_bytes());
        assert!(g("sim-c4-*", "sim-c4-fa6bef957b90"));
        assert!(g("*c4*", "sim-c4-fa6bef957b90"));
        assert!(g("sim-c?-*", "sim-c4-x"));
        assert!(
            !g("sim-c4", "sim-c4-fa6bef957b90"),
            "a glob matches the whole id"
        );
        assert!(g("sim-c1*", "sim-c16x") && !g("sim-c1?", "sim-c16x"));
        assert!(g("a*b*c", "axxbyyc") && !g("a*b*c", "axxbyy"));
        assert!(g("*", "") && g("", "") && !g("", "a"));
    }
}
