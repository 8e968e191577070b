//! The command line: summaries, exit codes, stdin, and errors on stderr.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::support::{benchplan, repo, stderr, stdout};

#[test]
fn validate_prints_a_one_line_summary() {
    let out = benchplan(&["validate", "plans/compare.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "plans/compare.yaml: 5 cases, 2 services"
    );
}

#[test]
fn a_bad_plan_exits_2_with_every_diagnostic_on_stderr() {
    let dir = std::env::temp_dir().join(format!("benchplan-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "[defaults]\nmax_concurency = 4\nmax_concurrency = 0\n",
    )
    .unwrap();
    let out = benchplan(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("bad.toml:2:1: `defaults.max_concurency`: unknown key"),
        "{err}"
    );
    assert!(
        err.contains(
            "bad.toml:3:1: `defaults.max_concurrency`: max_concurrency must be at least 1"
        ),
        "{err}"
    );
    assert!(err.contains("2 errors in"), "{err}");
    assert!(stdout(&out).is_empty());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_plan_reads_from_stdin_with_its_format() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_benchplan"))
        .args(["validate", "-", "--format", "yaml"])
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"matrix:\n  max_concurrency: [1, 2]\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "<stdin>: 2 cases, 1 service");

    let out = benchplan(&["validate", "-"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--format"));
}

#[test]
fn usage_errors_exit_2_and_missing_files_are_explained() {
    let out = benchplan(&["validate"]);
    assert_eq!(out.status.code(), Some(2));
    let out = benchplan(&["validate", "plans/does-not-exist.toml"]);
    crate::support::exits_saying(&out, 2, "cannot read plan plans/does-not-exist.toml");
}

#[test]
fn cases_table_lists_the_varying_parameters() {
    let out = benchplan(&["cases", "plans/length-sweep.toml"]);
    assert!(out.status.success());
    let text = stdout(&out);
    let header = text.lines().next().unwrap();
    assert!(
        header.contains("dataset.input_len") && header.contains("max_concurrency"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("6 cases, 1 service"), "{text}");
}

#[test]
fn every_flag_and_argument_of_every_command_has_help() {
    use clap::CommandFactory;
    let mut missing = Vec::new();
    let cmd = benchplan::cli::Cli::command();
    for sub in cmd.get_subcommands() {
        for arg in sub.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("{} {}", sub.get_name(), id));
            }
        }
    }
    assert!(missing.is_empty(), "no help text: {missing:#?}");
}
