//! Text from outside (a server's model id and error bodies, the environment) made safe
//! for the place it lands in: one function per output format, used by every writer.
//! The values stay whole in the result JSON (serde escapes them); these are for the
//! formats that would interpret them.
//!
//! - [`markdown`]: report.md and `$GITHUB_STEP_SUMMARY`. Line breaks fold to spaces
//!   (no forged heading or table row); `<` before what could open a tag, comment or
//!   autolink, and `&` before what could form an entity, become entities (no raw
//!   HTML); `\ ` * ~ [ ] |` are backslash-escaped (no link or image, no forged
//!   emphasis or code, no table cell), and `_` where it could open or close emphasis;
//!   a leading `#`, `>`, list or ordered-list marker is escaped too. Text that needs
//!   none of this (`p99_ttft <= 500ms`) stays as written.
//! - [`xml`]: junit.xml. XML 1.0 forbids most control characters even as references,
//!   so they become U+FFFD; `& < > " '` become entities.
//! - [`csv_cell`]: summary.csv. A cell a spreadsheet would evaluate (starting with
//!   `= + - @`, tab or CR) gets a leading `'` (OWASP's rule), unless it is a number.
//! - [`console`]: the terminal. Control characters (ESC, NUL, C1, DEL; CR and LF
//!   inside one message) are shown as `\x1b`-style escapes, never written raw.
//! - [`file_name`]: a printable ASCII subset, bounded length, never `.` or `..`.
//! - [`html_text`]: report.html. Control and bidi characters become U+FFFD; then
//!   minijinja's auto-escaping (see `report::render_html`) escapes the markup.

/// Whether `c` is a control character a terminal or a format may act on.
fn is_control(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every control character shown as an escape (`\x1b`, `\u{9b}`); CR, LF and
/// tab too, so one message stays one line.
pub fn console(s: &str) -> String {
    if !s.chars().any(is_control) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_control(c) {
            let n = c as u32;
            if n < 0x80 {
                out.push_str(&format!("\\x{n:02x}"));
            } else {
                out.push_str(&format!("\\u{{{n:x}}}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `x` with two decimals, in scientific notation past a trillion (a 1e308 from a
/// damaged result file is 309 digits otherwise): a printed number is never wider than
/// 16 characters.
pub fn number(x: f64) -> String {
    if x.is_finite() && x.abs() >= 1e12 {
        format!("{x:.3e}")
    } else {
        format!("{x:.2}")
    }
}

/// `s` before it is HTML-escaped (report.html): control and bidi characters (ESC, BEL,
/// C1 CSI, U+202E, …) become U+FFFD, so `cat report.html` replays no terminal escape
/// and a browser reverses no text; line breaks and tabs stay.
pub fn html_text(s: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| is_control(c) && !matches!(c, '\n' | '\r' | '\t');
    if !s.chars().any(bad) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(
        s.chars()
            .map(|c| if bad(c) { '\u{fffd}' } else { c })
            .collect(),
    )
}

/// `s` for inline markdown (a table cell, a list item, a paragraph): see the module docs.
pub fn markdown(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 8);
    let alnum = |i: Option<usize>| {
        i.and_then(|i| chars.get(i))
            .is_some_and(|c| c.is_alphanumeric())
    };
    let mut at_start = true;
    for (i, &c) in chars.iter().enumerate() {
        let next = chars.get(i + 1).copied();
        match c {
            '\r' | '\n' | '\t' => out.push(' '),
            c if is_control(c) => out.push('\u{fffd}'),
            // Raw HTML and autolinks start `<` + a letter, `/`, `!` or `?`.
            '<' if next.is_none_or(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?')) => {
                out.push_str("&lt;")
            }
            '&' if next.is_none_or(|n| n.is_ascii_alphanumeric() || n == '#') => {
                out.push_str("&amp;")
            }
            '\\' | '`' | '*' | '~' | '[' | ']' | '|' => {
                out.push('\\');
                out.push(c);
            }
            // An underscore between two letters or digits can neither open nor close
            // emphasis (`p99_ttft`); anywhere else it is escaped.
            '_' if !(alnum(i.checked_sub(1)) && alnum(Some(i + 1))) => out.push_str("\\_"),
            '#' | '>' if at_start => {
                out.push('\\');
                out.push(c);
            }
            // (A lone `-` is an empty list item at worst: our tables print it for none.)
            '-' | '+' if at_start && next.is_some_and(char::is_whitespace) => {
                out.push('\\');
                out.push(c);
            }
            '.' | ')' if at_start_number(&chars, i) && next.is_some_and(char::is_whitespace) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
        if !c.is_ascii_digit() && !c.is_whitespace() {
            at_start = false;
        }
    }
    out
}

/// Whether `chars[i]` ends a run of digits that starts the text (`1.` would be a list).
fn at_start_number(chars: &[char], i: usize) -> bool {
    i > 0 && chars[..i].iter().all(char::is_ascii_digit)
}

/// `s` for XML 1.0 text or an attribute value: see the module docs.
pub fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Allowed: tab, LF, CR, then U+0020..U+D7FF, U+E000..U+FFFD, U+10000.. (the
            // surrogates cannot be in a Rust string). LF and CR are kept as references
            // so an attribute keeps them.
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// `s` as a CSV cell a spreadsheet shows as text: see the module docs.
pub fn csv_cell(s: &str) -> String {
    let cleaned: String = s
        .chars()
        .map(|c| {
            if c == '\0' || (is_control(c) && !matches!(c, '\t' | '\r' | '\n')) {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect();
    let risky = cleaned
        .chars()
        .next()
        .is_some_and(|c| matches!(c, '=' | '+' | '-' | '@' | '\t' | '\r'));
    if risky && cleaned.parse::<f64>().is_err() {
        format!("'{cleaned}")
    } else {
        cleaned
    }
}

/// The longest file name [`file_name`] makes, in bytes (well under the 255 of common
/// file systems, leaving room for a suffix such as `.rep3.json`).
pub const FILE_NAME_MAX: usize = 120;

/// `s` as (part of) a file name: ASCII letters, digits, `.`, `-` and `_`, anything else
/// as `_`; at most `max` bytes (a longer one keeps its start and gets a hash of the
/// whole, so two long names stay apart); never empty, `.` or `..`.
pub fn file_name(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.len() > max {
        let hash = format!("{:016x}", crate::hash::fnv1a64(s.as_bytes()));
        out.truncate(max.saturating_sub(hash.len() + 1));
        out.push('-');
        out.push_str(&hash);
    }
    if out.is_empty() || out.chars().all(|c| c == '.') {
        out = format!("_{out}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_neutralizes_html_images_tables_headings_and_emphasis() {
        let m = markdown("<img src=x onerror=alert(1)>");
        assert!(!m.contains('<') && m.contains("&lt;img"), "{m}");
        let m = markdown("![x](http://evil.example/track)");
        assert_eq!(m, "!\\[x\\](http://evil.example/track)");
        let m = markdown("ok\r\n# heading\n| cell | **PASS** |");
        assert!(!m.contains('\n') && !m.contains('\r'), "{m}");
        assert!(
            m.contains("\\| cell \\|") && m.contains("\\*\\*PASS\\*\\*"),
            "{m}"
        );
        assert_eq!(markdown("# heading"), "\\# heading");
        assert_eq!(markdown("- item"), "\\- item");
        assert_eq!(markdown("12. x"), "12\\. x");
        assert_eq!(markdown("-"), "-");
        assert_eq!(markdown("12.50"), "12.50");
        assert_eq!(markdown("http_500: 3"), "http_500: 3");
        assert_eq!(markdown("_x_ and __y__"), "\\_x\\_ and \\_\\_y\\_\\_");
        assert_eq!(
            markdown("p99_ttft <= 500ms & more"),
            "p99_ttft <= 500ms & more"
        );
        assert_eq!(
            markdown("a <b> &amp; <!-- c"),
            "a &lt;b> &amp;amp; &lt;!-- c"
        );
        assert_eq!(markdown("success_rate >= 99%"), "success_rate >= 99%");
        assert!(!markdown("a\u{1b}[2Jb\0").contains(['\u{1b}', '\0']));
    }

    #[test]
    fn xml_has_no_forbidden_character() {
        let x = xml("a\u{1b}[31m\0b<c>&\"'\u{7}");
        assert!(!x.chars().any(|c| (c as u32) < 0x20), "{x:?}");
        assert!(x.contains("&lt;c&gt;&amp;&quot;&apos;"));
    }

    #[test]
    fn csv_cells_that_a_spreadsheet_would_evaluate_are_quoted_as_text() {
        assert_eq!(
            csv_cell("=HYPERLINK(\"http://x\")"),
            "'=HYPERLINK(\"http://x\")"
        );
        for s in ["+1+1", "-1+2", "@SUM(A1)", "\t=1", "\r=1"] {
            assert!(csv_cell(s).starts_with('\''), "{s}");
        }
        assert_eq!(csv_cell("-12.5"), "-12.5", "numbers stay numbers");
        assert_eq!(csv_cell("a\0b"), "a\u{fffd}b");
        assert_eq!(csv_cell("plain"), "plain");
    }

    #[test]
    fn html_text_has_no_control_or_bidi_character() {
        let t = html_text("a\u{1b}]52;c;x\u{7}\u{9b}b\u{202e}c\nd");
        assert_eq!(t, "a\u{fffd}]52;c;x\u{fffd}\u{fffd}b\u{fffd}c\nd");
        assert!(matches!(
            html_text("plain <b>"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn the_console_sees_escapes_not_control_characters() {
        let c = console("a\u{1b}]8;;http://x\u{7}link\u{1b}]8;;\u{7}\0\r\n\u{9b}2J");
        assert!(!c.chars().any(char::is_control), "{c:?}");
        assert!(c.contains("\\x1b]8;;http://x\\x07"), "{c}");
        assert_eq!(console("plain text"), "plain text");
    }

    #[test]
    fn file_names_are_printable_and_bounded() {
        let long = "m".repeat(300);
        let f = file_name(&long, FILE_NAME_MAX);
        assert!(f.len() <= FILE_NAME_MAX);
        assert_ne!(f, file_name(&format!("{long}x"), FILE_NAME_MAX));
        assert_eq!(file_name("org/Model\r\n:7B", 64), "org_Model___7B");
        assert_eq!(file_name("..", 64), "_..");
        assert_eq!(file_name("", 64), "_");
    }
}
