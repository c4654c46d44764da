//! `engine.sample`: sampled runs against the same runs simulated in full (fast-forward off).

use serde_json::json;

use crate::report::Report;
use crate::sim::run;
use crate::workload::spec::parse_workload;

/// A program text of `nr` 2 MiB ranges executed `passes` times, each range followed by random
/// reads of a 42 KB data array (the shape of seed 004's program, scaled down).
fn text_loop(file_text: &str, nr: u64, passes: u64) -> serde_json::Value {
    let body: Vec<_> = (0..nr)
        .flat_map(|i| {
            [
                json!({"op": "fetch", "region": "text", "offset": i << 21, "length": 1u64 << 21}),
                json!({"op": "read", "region": "data", "pattern": "random", "stride": 64, "count": 20000,
                       "seed": i + 1}),
            ]
        })
        .collect();
    json!({"name": "sampled", "machine": {"profile": "desktop-2018", "memory": "1G", "cpus": 1},
        "knobs": {"transparent_hugepage/file_text": file_text},
        "program": [
            {"op": "create", "file": "t", "size": (nr << 21).to_string()},
            {"op": "exec", "file": "t", "name": "text", "text_size": (nr << 21).to_string(), "align": "2M"},
            {"op": "mmap", "name": "data", "size": 42240}, {"op": "write", "region": "data"},
            {"op": "loop", "count": passes, "body": body}]})
}

fn go(w: &serde_json::Value, sets: &[(&str, &str)]) -> Report {
    let w = parse_workload(&w.to_string()).expect("valid");
    let sets: Vec<(String, String)> = sets.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    run(&w, &sets, false).expect("runs")
}

/// Every kernel count equal, every perf count within its interval (plus the rounding of
/// the extrapolation).
fn agree(full: &Report, sampled: &Report) {
    assert_eq!(full.vmstat, sampled.vmstat);
    assert_eq!(full.meminfo, sampled.meminfo);
    let s = sampled.sampling.as_ref().expect("sampling report");
    for name in ["page-faults", "minor-faults", "major-faults"] {
        assert_eq!(full.perf.get(name), sampled.perf.get(name), "{name}");
        assert_eq!(s.ci95.get(name), None, "{name} is exact");
    }
    for (name, half) in &s.ci95.0 {
        let (a, b) = (full.perf.get(name).expect(name), sampled.perf.get(name).expect(name));
        let slack = if name == "seconds" || name == "task-clock" { 1e-3 } else { 1.0 };
        assert!((a - b).abs() <= half + slack, "{name}: full {a}, sampled {b} ± {half}");
    }
}

/// Identical passes (the random reads restart from their seed each time): every unit counts
/// the same, the interval is empty and the extrapolation is the full run's count.
#[test]
fn identical_iterations_extrapolate_exactly() {
    for file_text in ["off", "seed"] {
        let w = text_loop(file_text, 4, 24);
        let full = go(&w, &[("engine.fast_forward", "0")]);
        let sampled = go(&w, &[("engine.sample", "4:1")]);
        agree(&full, &sampled);
        let s = sampled.sampling.as_ref().expect("sampling");
        // Pass 1 faults (discarded), pass 2 warms, passes 3-6 are the units, 18 extrapolated.
        assert_eq!((s.units_measured, s.extrapolations, s.extrapolated_iterations), (4, 1, 18), "{file_text}");
        assert!(s.ci95.0.iter().all(|(_, h)| *h == 0.0), "{:?}", s.ci95);
        assert!(sampled.engine.steps < full.engine.steps / 3);
    }
}

/// Random replacement in L2 and the LLC: passes differ, the units' spread gives intervals,
/// and the full run's counts fall inside them.
#[test]
fn sampled_counts_fall_in_their_intervals() {
    let w = text_loop("off", 8, 30);
    let random = [("hw.cache.l2.replacement", "random"), ("hw.cache.llc.replacement", "random")];
    let full = go(&w, &[random[0], random[1], ("engine.fast_forward", "0")]);
    let sampled = go(&w, &[random[0], random[1], ("engine.sample", "8:1")]);
    agree(&full, &sampled);
    let s = sampled.sampling.as_ref().expect("sampling");
    assert_eq!(s.extrapolated_iterations, 20);
    assert!(s.ci95.get("LLC-load-misses").expect("interval") > 0.0, "{:?}", s.ci95);
    assert!(s.ci95.get("cycles").expect("interval") > 0.0);
}

/// khugepaged asleep: no extrapolation passes its wake-up, and each collapse discards the
/// units measured before it; the kernel counts equal the full run's.
#[test]
fn sampling_stops_at_khugepaged_wake_up() {
    let mut w = text_loop("khugepaged", 4, 400);
    w["knobs"] = json!({"transparent_hugepage/file_text": "khugepaged", "transparent_hugepage/enabled": "always",
        "transparent_hugepage/khugepaged/scan_sleep_millisecs": "20",
        "transparent_hugepage/khugepaged/pages_to_scan": "1024"});
    let full = go(&w, &[("engine.fast_forward", "0")]);
    let sampled = go(&w, &[("engine.sample", "3:1")]);
    assert_eq!(full.vmstat.get("thp_collapse_alloc"), Some(4));
    agree(&full, &sampled);
    let s = sampled.sampling.as_ref().expect("sampling");
    assert!(s.extrapolations >= 2, "{s:?}");
}

/// Two tasks running at once are not sampled (a skip of one would change the other's run):
/// the parent's loop, run beside its child, is not sampled and its counts are the full
/// run's; the child's loop is sampled once it runs alone.
#[test]
fn concurrent_tasks_are_not_sampled() {
    let mut w = text_loop("seed", 2, 12);
    w["machine"]["cpus"] = json!(2);
    let prog = w["program"].as_array().expect("ops").clone();
    let (setup, lp) = prog.split_at(4);
    let mut child = lp[0].clone();
    child["count"] = json!(60);
    let mut p = setup.to_vec();
    p.push(json!({"op": "fork", "program": [child]}));
    p.push(lp[0].clone());
    p.push(json!({"op": "wait"}));
    w["program"] = json!(p);
    let sampled = go(&w, &[("engine.sample", "3:1")]);
    let full = go(&w, &[("engine.fast_forward", "0")]);
    assert_eq!(sampled.processes[0].perf, full.processes[0].perf);
    let s = sampled.sampling.as_ref().expect("sampling");
    // The child's first pass fills its own PMD pages from the file (seed: no page-cache copy),
    // so the parent's loop runs beside the child's faults; the child's loop runs alone after.
    assert!(s.extrapolated_iterations > 0 && s.extrapolated_iterations < 60, "{s:?}");
    assert_eq!(sampled.vmstat, full.vmstat);
}

#[test]
fn bad_sample_specs_are_refused_by_name() {
    let w = parse_workload(&text_loop("off", 1, 2).to_string()).expect("valid");
    for bad in ["1", "x", "4:y", "-3"] {
        let e = run(&w, &[("engine.sample".into(), bad.into())], false).expect_err(bad).to_string();
        assert!(e.contains("engine.sample"), "{bad}: {e}");
    }
}
