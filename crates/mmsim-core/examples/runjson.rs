//! Run a workload file and print the report JSON (a development aid).
fn main() {
    let path = std::env::args().nth(1).expect("usage: runjson WORKLOAD.json [--check] [--sabotage-fork-flush]");
    let check = std::env::args().any(|a| a == "--check");
    let text = std::fs::read_to_string(path).expect("readable");
    let w = mmsim_core::workload::spec::parse_workload(&text).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    let mut opts = mmsim_core::sim::RunOptions { check, ..Default::default() };
    opts.sabotage.skip_fork_flush = std::env::args().any(|a| a == "--sabotage-fork-flush");
    match mmsim_core::sim::run_with(&w, &[], &opts) {
        Ok(r) => println!("{}", serde_json::to_string(&r).unwrap()),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
