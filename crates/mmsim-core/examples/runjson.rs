//! Run a workload file and print the report JSON, without Python (a development aid and the
//! engine-only timing of `make bench`).
//!
//! runjson WORKLOAD.json [--check] [--set NAME=VALUE ...] [--sabotage-fork-flush]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: runjson WORKLOAD.json [--check] [--set NAME=VALUE ...]");
        std::process::exit(2);
    };
    let check = args.iter().any(|a| a == "--check");
    let sets: Vec<(String, String)> = args
        .windows(2)
        .filter(|w| w[0] == "--set")
        .filter_map(|w| w[1].split_once('=').map(|(a, b)| (a.to_string(), b.to_string())))
        .collect();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("error: {path}: {e}");
        std::process::exit(2)
    });
    let w = mmsim_core::workload::spec::parse_workload(&text).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    let mut opts = mmsim_core::sim::RunOptions { check, ..Default::default() };
    opts.sabotage.skip_fork_flush = args.iter().any(|a| a == "--sabotage-fork-flush");
    match mmsim_core::sim::run_with(&w, &sets, &opts) {
        Ok(r) => println!("{}", serde_json::to_string(&r).expect("serialise")),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
