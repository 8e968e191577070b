//! How long a 100,000-case plan takes to load, expand and validate.
//! Run: `cargo bench --bench plan_expand`. Prints the figures; asserts nothing about time.

use std::time::Instant;

use benchplan::plan::{Format, PlanSource};

fn main() {
    let axis = |n: usize, scale: usize| {
        (1..=n)
            .map(|i| (i * scale).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let text = format!(
        "[services.a]\nsim = {{ preset = \"fast\" }}\n[services.b]\nsim = {{ preset = \"fast\" }}\n\
         [slo]\np99_ttft = \"<= 500ms\"\n\
         [matrix]\nmax_concurrency = [{}]\n\"dataset.input_len\" = [{}]\n\"dataset.output_len\" = [{}]\n",
        axis(50, 1),
        axis(50, 64),
        axis(20, 16)
    );
    let mut best = f64::INFINITY;
    for run in 0..5 {
        let start = Instant::now();
        let source =
            PlanSource::parse(&text, "bench.toml", ".".into(), Format::Toml).expect("parses");
        let planned = benchplan::planner::plan(source).expect("valid plan");
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(planned.cases.len(), 100_000);
        best = best.min(secs);
        println!(
            "run {run}: {} cases expanded and validated in {:.3} s ({:.2} µs/case)",
            planned.cases.len(),
            secs,
            secs * 1e6 / 1e5
        );
    }
    println!("best: {best:.3} s for 100,000 cases");
}
