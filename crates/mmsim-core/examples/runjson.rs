//! Run a workload file and print the report JSON (a development aid).
fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: runjson WORKLOAD.json [--check]");
    let check = std::env::args().any(|a| a == "--check");
    let text = std::fs::read_to_string(path).expect("readable");
    match mmsim_core::api::run_json(&text, &[], check) {
        Ok(r) => println!("{r}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
