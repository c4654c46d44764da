//! Tests of kernel/knobs.rs: parsing, errors, and the knob table.
use super::*;

#[test]
fn set_and_get_round_trip() {
    let mut k = Knobs::default();
    for info in Knobs::describe() {
        k.set(info.name, &info.default).unwrap();
    }
    assert_eq!(k, Knobs::default());
    k.set("transparent_hugepage/enabled", "always").unwrap();
    assert_eq!(k.thp_enabled, ThpEnabled::Always);
    k.set("fail_page_alloc/min_order", "9").unwrap();
    assert_eq!(k.fail_min_order, Some(9));
}

#[test]
fn errors_name_the_knob() {
    let mut k = Knobs::default();
    let e = k.set("transparent_hugepage/enabled", "sometimes").unwrap_err().to_string();
    assert!(e.contains("transparent_hugepage/enabled"), "{e}");
    let e = k.set("no/such", "1").unwrap_err().to_string();
    assert!(e.contains("unknown knob"), "{e}");
    assert!(k.set("fault_around_bytes", "12345").is_err());
    let e = k.set("page_alloc/pcp_batch", "0").unwrap_err().to_string();
    assert!(e.contains("page_alloc/pcp_batch") && e.contains("legacy"), "{e}");
    k.set("page_alloc/pcp_batch", "7").unwrap();
    assert_eq!((k.pcp_batch, k.get("page_alloc/pcp_batch").unwrap().as_str()), (PcpBatch::Pages(7), "7"));
    for bad in ["300", "4194305", "-1", "32768.5", "lots"] {
        let e = k.set("kernel/pid_max", bad).unwrap_err().to_string();
        assert!(e.contains("kernel/pid_max") && e.contains("301..4194304"), "{e}");
    }
    k.set("kernel/pid_max", "301").unwrap();
    k.set("kernel/pid_max", "4194304").unwrap();
    assert_eq!(k.get("kernel/pid_max").as_deref(), Some("4194304"));
    k.set("vm/ptshare", "pmd, pte").unwrap();
    assert_eq!((k.ptshare, k.get("vm/ptshare").unwrap().as_str()), (ptshare::PTE | ptshare::PMD, "pte,pmd"));
    let e = k.set("vm/ptshare", "pte,p4d").unwrap_err().to_string();
    assert!(e.contains("vm/ptshare") && e.contains("pte, pmd, pud"), "{e}");
    k.set("vm/ptshare", "off").unwrap();
    assert_eq!(k.ptshare, 0);
}

#[test]
fn errors_are_typed_and_worded_as_before() {
    let mut k = Knobs::default();
    let e = k.set("transparent_hugepage/defrag", " sometimes ").unwrap_err();
    assert_eq!(
        e,
        KnobError::InvalidValue {
            knob: "transparent_hugepage/defrag",
            value: "sometimes".into(),
            expected: "always, defer, defer+madvise, madvise or never",
        }
    );
    assert_eq!(
        e.to_string(),
        "knob transparent_hugepage/defrag: invalid value \"sometimes\" (expected always, defer, \
         defer+madvise, madvise or never)"
    );
    let e = k.set("fault_around_bytes", "lots").unwrap_err().to_string();
    assert_eq!(e, "knob fault_around_bytes: invalid value \"lots\" (expected a size)");
    let e = k.set("kernel/hz", "200").unwrap_err().to_string();
    assert_eq!(e, "knob kernel/hz: invalid value \"200\" (expected 100, 250, 300 or 1000)");
    let e = k.set("no/such", "1").unwrap_err();
    assert_eq!(e, KnobError::UnknownKnob { name: "no/such".into() });
    let known: Vec<&str> = Knobs::names().collect();
    assert_eq!(e.to_string(), format!("unknown knob \"no/such\" (known: {})", known.join(", ")));
    assert_eq!(k, Knobs::default(), "a refused write changes nothing");
}

#[test]
fn every_knob_is_declared_once_and_round_trips() {
    let mut names: Vec<&str> = Knobs::names().collect();
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n, "names are unique");
    for info in Knobs::describe() {
        let mut k = Knobs::default();
        k.set(info.name, &info.default).unwrap();
        assert_eq!(k, Knobs::default(), "{}: its default round-trips", info.name);
    }
    // The declaration's range is pid_max_min..pid_max_max; its default PID_MAX_DEFAULT.
    let pid_max = Knobs::table().find(|k| k.name == "kernel/pid_max").unwrap();
    assert_eq!(pid_max.values, format!("{PID_MAX_MIN}..{PID_MAX_LIMIT}"));
    assert_eq!(Knobs::default().pid_max, PID_MAX_DEFAULT);
}

#[test]
fn boot_only_comes_from_the_declaration() {
    assert_eq!(
        BOOT_ONLY,
        [
            "transparent_hugepage/huge_zero_page_alloc",
            "transparent_hugepage/hzp_refcount",
            "transparent_hugepage/file_text",
            "page_alloc/pcp_batch",
            "kernel/pt_reclaim",
            "init_on_alloc",
            "init_on_free",
            "vm/scrub_merge",
            "kernel/fault_locking",
            "kernel/hugetlb_pmd_share",
            "kernel/pagecache_lock",
            "kernel/hz",
            "cgroup/memory",
        ]
    );
    let declared: Vec<&str> = Knobs::table().filter(|k| k.boot_only).map(|k| k.name).collect();
    assert_eq!(BOOT_ONLY, declared);
}

#[test]
fn sysfs_words_are_written_once() {
    assert_eq!(ThpDefrag::CODEC.values, "always|defer|defer+madvise|madvise|never");
    assert_eq!((ThpDefrag::CODEC.parse)("defer+madvise"), Ok(ThpDefrag::DeferMadvise));
    assert_eq!((ThpDefrag::CODEC.show)(&ThpDefrag::DeferMadvise), "defer+madvise");
    assert_eq!((HzpKind::CODEC.parse)("zero"), Err("hzp or vhzp"));
    assert_eq!((FaultLocking::CODEC.parse)("x"), Err("per_vma, mmap_lock or page_table_lock"));
}
