//! Property tests of the parsers that read what users and servers send: plans (TOML and
//! YAML), `--set` overrides, the SSE framer, the HTTP/1.1 response parser with its
//! chunked decoder, the SLO grammar and the stream chunk reader. Each drives the entry
//! points of `benchplan::fuzz` (the same the `cargo fuzz` targets use), and the inputs
//! a fuzzer once crashed them with are kept in `tests/fixtures/fuzz-regressions/`.

use proptest::prelude::*;

use benchplan::fuzz;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Text that looks like a plan: keys, tables, brackets, quotes, anchors, numbers.
fn plan_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("[services.s]\n".to_string()),
        Just("sim = { preset = \"fast\" }\n".to_string()),
        Just("[defaults]\n".to_string()),
        Just("[matrix]\n".to_string()),
        Just("max_concurrency = [1, 2]\n".to_string()),
        Just("num_prompts = 5\n".to_string()),
        Just("request_rate = inf\n".to_string()),
        Just("burstiness = nan\n".to_string()),
        Just("\"dataset.input_len\" = [8]\n".to_string()),
        Just("a: &x [1, *x]\n".to_string()),
        Just("- { k: v }\n".to_string()),
        Just("[[matrix.exclude]]\n".to_string()),
        "[ -~]{0,12}",
        "[\\[\\]{}\"'=:,.#\n ]{0,8}",
    ];
    prop::collection::vec(piece, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn plans_of_any_shape_never_panic(text in plan_like(), bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        fuzz::plan(text.as_bytes(), benchplan::plan::Format::Toml);
        fuzz::plan(text.as_bytes(), benchplan::plan::Format::Yaml);
        fuzz::plan(&bytes, benchplan::plan::Format::Toml);
        fuzz::plan(&bytes, benchplan::plan::Format::Yaml);
    }

    #[test]
    fn set_overrides_never_panic(key in "[a-z_.\"\\[\\]0-9]{0,30}", value in "[ -~]{0,30}") {
        fuzz::set_override(format!("{key}={value}").as_bytes());
        fuzz::set_override(key.as_bytes());
    }

    #[test]
    fn sse_events_do_not_depend_on_read_boundaries(
        events in prop::collection::vec(
            prop_oneof![
                Just("data: {\"a\":1}\n\n".to_string()),
                Just("data:x\r\n\r\n".to_string()),
                Just(": comment\n".to_string()),
                Just("event: error\n".to_string()),
                Just("id: 7\n".to_string()),
                Just("\r".to_string()),
                Just("\n".to_string()),
                "[ -~]{0,40}",
            ],
            0..30,
        ),
        split in any::<u8>(),
    ) {
        let mut data = vec![split];
        data.extend_from_slice(events.concat().as_bytes());
        fuzz::sse(&data);
    }

    #[test]
    fn sse_on_raw_bytes(data in prop::collection::vec(any::<u8>(), 0..600)) {
        fuzz::sse(&data);
    }

    #[test]
    fn http_responses_decode_the_same_at_any_split(
        chunks in prop::collection::vec("[ -~]{0,20}", 0..8),
        kind in 0u8..4,
        splits in prop::collection::vec(any::<u8>(), 0..4),
        junk in "[0-9a-fA-F;xz \r\n]{0,12}",
    ) {
        let body: String = chunks.concat();
        let wire = match kind {
            0 => {
                let mut w = String::from("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
                // An empty chunk would be the terminator: real senders skip them.
                for c in chunks.iter().filter(|c| !c.is_empty()) {
                    w.push_str(&format!("{:x}\r\n{c}\r\n", c.len()));
                }
                w.push_str("0\r\n\r\n");
                w
            }
            1 => format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len()),
            2 => format!("HTTP/1.0 200 OK\r\n\r\n{body}"),
            _ => format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{junk}{body}"),
        };
        let mut data = splits.clone();
        data.resize(4, 0);
        data.extend_from_slice(wire.as_bytes());
        fuzz::http_response(&data);
        if kind < 3 {
            let got = benchplan::client::h1::parse_response(wire.as_bytes(), &[]);
            prop_assert_eq!(got, Ok((200, body.into_bytes())));
        }
    }

    #[test]
    fn http_responses_on_raw_bytes(data in prop::collection::vec(any::<u8>(), 0..400)) {
        let mut framed = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        framed.extend_from_slice(&data);
        fuzz::http_response(&framed);
        fuzz::http_response(&data);
    }

    #[test]
    fn the_slo_grammar_never_panics(text in "[a-z0-9_.:<>=% ]{0,30}") {
        fuzz::slo(text.as_bytes());
    }

    #[test]
    fn chunks_of_any_json_never_panic(text in "[\\[\\]{}\":,a-z0-9 ]{0,60}") {
        fuzz::chunk(text.as_bytes());
        let framed = format!("{{\"choices\":[{{\"delta\":{text}}}]}}");
        fuzz::chunk(framed.as_bytes());
    }
}

/// Every input a fuzzer found a crash with, through its target (the folder name).
#[test]
fn the_fuzz_regression_corpus_passes() {
    let root = crate::support::repo().join("tests/fixtures/fuzz-regressions");
    let mut ran = 0;
    for (name, target) in fuzz::TARGETS {
        let dir = root.join(name);
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for f in rd {
            let p = f.unwrap().path();
            target(&std::fs::read(&p).unwrap());
            ran += 1;
        }
    }
    assert!(ran > 0, "no regression inputs under {}", root.display());
}

/// Cases of `services` services with the given case counts, in plan order.
fn cases_of(counts: &[usize]) -> Vec<benchplan::planner::Case> {
    let mut out = Vec::new();
    for (s, n) in counts.iter().enumerate() {
        for k in 0..*n {
            out.push(benchplan::planner::Case {
                id: format!("svc{s}-c{k}"),
                service: format!("svc{s}"),
                params: Default::default(),
                assignments: Vec::new(),
                repeats: None,
            });
        }
    }
    out
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn by_service_shards_never_share_a_service_and_cover_every_case_once(
        counts in prop::collection::vec(1usize..6, 1..9),
        n in 1usize..10,
    ) {
        use benchplan::planner::shard::{ShardBy, assign};
        let cases = cases_of(&counts);
        match assign(&cases, n, ShardBy::Service) {
            Err(e) => {
                prop_assert!(n > counts.len(), "{e}");
                prop_assert!(e.contains(&format!("{n} shards")) && e.contains(&format!("only {} services", counts.len())), "{e}");
            }
            Ok(of) => {
                prop_assert!(n <= counts.len());
                prop_assert_eq!(of.len(), cases.len());
                for (c, s) in cases.iter().zip(&of) {
                    prop_assert!(*s < n);
                    // Every case of this service is on the same shard.
                    for (d, t) in cases.iter().zip(&of) {
                        if d.service == c.service {
                            prop_assert_eq!(s, t, "{} split", c.service);
                        }
                    }
                }
                for shard in 0..n {
                    prop_assert!(of.contains(&shard), "shard {shard} is empty");
                }
                // The same plan and N give the same assignment: no contact between shards needed.
                prop_assert_eq!(assign(&cases, n, ShardBy::Service).unwrap(), of);
            }
        }
        if let Ok(of) = assign(&cases, n, ShardBy::Case) {
            prop_assert!((0..n).all(|s| of.contains(&s)));
        }
    }
}
