//! How long 100,000 random prompts of 1,024 tokens take to build with the Qwen2.5
//! tokenizer from ../shared (skipped when it is absent), and the memory they hold.
//! Run: `cargo bench --bench dataset_build`. Prints figures; asserts nothing about time.

use std::path::Path;
use std::time::Instant;

use benchplan::client::backend::Prompt;
use benchplan::plan::Backend;
use benchplan::plan::dataset::RandomDataset;
use benchplan::tokenizer::TokenModel;

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .map_or(0.0, |k| k / 1024.0)
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/tokenizers/qwen2.5");
    let (tok, name) = match TokenModel::load(&dir) {
        Ok(t) => (t, "qwen2.5"),
        Err(_) => {
            println!(
                "qwen2.5 tokenizer not found at {}; using the fixture tokenizer",
                dir.display()
            );
            (
                TokenModel::load(
                    &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer"),
                )
                .unwrap(),
                "fixture",
            )
        }
    };
    let t = Instant::now();
    let words = tok.word_table().map_or(0, |w| w.len());
    println!(
        "{name}: {words} whole-word tokens found in {:.2} s (once per tokenizer)",
        t.elapsed().as_secs_f64()
    );
    let before = rss_mib();
    let d = RandomDataset {
        input_len: 1024,
        output_len: 128,
        ..RandomDataset::default()
    };
    let t = Instant::now();
    let reqs = benchplan::dataset::random::random(&d, 100_000, 1, &tok, Backend::Openai).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let bytes: usize = reqs
        .iter()
        .map(|r| match &r.prompt {
            Prompt::Text(t) => t.len(),
            _ => 0,
        })
        .sum();
    println!(
        "100,000 prompts x 1,024 tokens: built in {secs:.2} s; {:.0} MiB of prompt text, RSS +{:.0} MiB",
        bytes as f64 / 1048576.0,
        rss_mib() - before
    );
    // Spot-check exactness by re-encoding a sample.
    let t = Instant::now();
    let exact = reqs
        .iter()
        .step_by(1000)
        .filter(|r| match &r.prompt {
            Prompt::Text(x) => tok.count(x) as u64 == r.prompt_len,
            _ => false,
        })
        .count();
    println!(
        "re-encoded 100 sampled prompts: {exact}/100 exact ({:.2} s)",
        t.elapsed().as_secs_f64()
    );
}
