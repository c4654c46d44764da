//! Kernel memory charged to a memory cgroup: the page cache's xarray nodes through the
//! object stock (kernel/memcontrol_kmem.rs, kernel/filemap_xa.rs). Counts are exact.

use serde_json::json;

use crate::report::Snapshot;
use crate::test_support::{run, snap};

fn box_stat(s: &Snapshot, key: &str) -> i64 {
    s.cgroups["box"].stat_live.get(key).unwrap_or_else(|| panic!("memory.stat {key}"))
}

/// 64 MiB written to a tmpfs file by a task of `box`: 16384 order-0 pages fill 256 leaf nodes
/// under 4 nodes of shift 6 and a root of shift 12, 261 radix_tree_node objects of 584 bytes
/// and their 8-byte obj_ext pointers, all charged to box (i_pages is XA_FLAGS_ACCOUNT): 38
/// pages of MEMCG_KMEM (154,512 bytes, the last page's rest in the object stock). Their
/// NR_SLAB_RECLAIMABLE_B reaches the memcg a page's worth at a time (every 7th node: 4,144
/// bytes), the last 2 nodes' still in the stock. The file's removal frees every node: the
/// statistics go back to 0 and the charge to at most the page the stock keeps (a new file of
/// the name unlinks the old one, whose inode goes with its last reference).
#[test]
fn a_tmpfs_file_written_in_a_cgroup_charges_its_xarray_nodes() {
    let r = run(json!({
        "cgroups": {"box": {}},
        "cgroup": "box",
        "program": [
            {"op": "snapshot", "label": "a"},
            {"op": "create", "file": "t", "size": 0, "fs": "tmpfs"},
            {"op": "pwrite", "file": "t", "length": "64M", "chunk": "1M"},
            {"op": "snapshot", "label": "b"},
            {"op": "create", "file": "t", "size": 0, "fs": "tmpfs"},
            {"op": "snapshot", "label": "c"}]
    }));
    let (a, b, c) = (snap(&r, "a"), snap(&r, "b"), snap(&r, "c"));
    let slab_kmem = |s: &Snapshot| box_stat(s, "kernel") - box_stat(s, "pagetables") - box_stat(s, "kernel_stack");
    assert_eq!(slab_kmem(b) - slab_kmem(a), 38 * 4096);
    assert_eq!(box_stat(b, "slab_reclaimable"), 37 * 7 * 592);
    assert_eq!(box_stat(b, "slab_unreclaimable"), 0);
    assert_eq!(b.vmstat.get("workingset_nodes"), Some(0), "no shadows in tmpfs");
    assert_eq!(box_stat(c, "slab_reclaimable"), 0);
    assert!(slab_kmem(c) - slab_kmem(a) <= 4096, "{}", slab_kmem(c) - slab_kmem(a));
}
