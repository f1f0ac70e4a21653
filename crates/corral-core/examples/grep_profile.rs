//! Runs one file tool on a directory, for profiling and timing outside Node:
//!
//!   cargo run --profile profiling -p corral-core --example grep_profile -- ROOT TOOL 'ARGS-JSON' [RUNS] ['OPTIONS']
//!
//! OPTIONS is `all` for limits that show everything (as `bench/run.mjs` uses), `tree` for the
//! defaults with no limit on the files scanned, else the defaults.
//! Prints each run's wall time and the last result's final line on stderr; with `PRINT=1` the
//! result on stdout.
use std::time::Instant;

use corral_core::fs::local::LocalFs;
use corral_core::tools::{call, Ctx, FsToolOptions};

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 4 {
        eprintln!("usage: grep_profile ROOT TOOL ARGS-JSON [RUNS] [all]");
        std::process::exit(2);
    }
    let fs = LocalFs::new(&a[1]).expect("root");
    let args: serde_json::Value = serde_json::from_str(&a[3]).expect("args");
    let runs: usize = a.get(4).and_then(|r| r.parse().ok()).unwrap_or(1);
    let mut o = FsToolOptions::default();
    if a.get(5).is_some() {
        o.max_files_scanned = 10_000_000;
        o.grep_timeout_ms = 600_000;
    }
    if a.get(5).map(String::as_str) == Some("all") {
        o.max_results = 10_000_000;
        o.max_output_chars = 1_000_000_000;
        o.max_files_scanned = 10_000_000;
        o.grep_timeout_ms = 600_000;
    }
    let mut out = serde_json::Value::Null;
    for _ in 0..runs {
        let t = Instant::now();
        out = call(&fs, &o, &a[2], &args, &Ctx::default()).await.expect("tool");
        eprintln!("{:.1} ms", t.elapsed().as_secs_f64() * 1000.0);
    }
    let text = out.as_str().unwrap_or_default();
    if std::env::var_os("PRINT").is_some() {
        println!("{text}");
    }
    let lines: Vec<&str> = text.lines().collect();
    eprintln!("{} lines; last: {:?}", lines.len(), lines.last());
}
