//! The hot path (access -> TLB -> page walk -> caches -> cost) allocates nothing: a counting
//! global allocator watches `translate` and `page_accesses` over mapped memory, with TLB hits,
//! misses, walks and cache misses at every level, data and instruction side.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use mmsim_core::hw::machine::{Machine, Translation};
use mmsim_core::hw::perf::PerfCounters;
use mmsim_core::hw::profile;
use mmsim_core::kernel::fault::Access;
use mmsim_core::kernel::knobs::Knobs;
use mmsim_core::kernel::mm::vm;
use mmsim_core::kernel::mmap::MmapArgs;
use mmsim_core::kernel::Kernel;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.with(|a| a.set(a.get() + 1));
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.with(|a| a.set(a.get() + 1));
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocations() -> u64 {
    ALLOCS.with(|a| a.get())
}

#[test]
fn translate_and_cache_accesses_allocate_nothing() {
    let mut k = Kernel::new(256 << 20, Knobs::default(), mmsim_core::units::Geometry::X86_64);
    let mm = k.exec_mm().unwrap();
    let len = 64u64 << 20;
    let a = k.do_mmap(mm, MmapArgs { len, prot: vm::READ | vm::WRITE | vm::EXEC, ..Default::default() }).unwrap();
    // Fault everything in first: faults are the kernel's slow path, not the hot path.
    let mut off = 0;
    while off < len {
        assert_eq!(k.handle_mm_fault(mm, a + off, true), 0);
        off += 4096;
    }
    // The memory bounds the caches' keys, as in a simulation: the L1s' and L2's tags are 32-bit.
    let mut m = Machine::with_memory(profile::builtin("westmere-ex", &[]).unwrap(), 2, 256 << 20);
    assert!(m.cpus[0].l1d.is_compact() && m.cpus[0].l2.is_compact());
    let mut perf = PerfCounters::default();
    m.switch_mm(0, mm, &mut perf);
    let before = allocations();
    for pass in 0..3 {
        let mut off = 0;
        while off < len {
            let access = match pass {
                0 => Access::Read,
                1 => Access::Write,
                _ => Access::Exec,
            };
            let Translation::Frame(pfn) = m.translate(0, &mut k, mm, a + off, access, &mut perf, false) else {
                panic!("mapped memory translates");
            };
            if access == Access::Exec {
                m.page_fetches(0, pfn, 0, 4096, 64, 16.0, &mut perf);
            } else {
                m.page_accesses(0, pfn, 0, 4096, 64, access == Access::Write, 3.0, &mut perf);
            }
            off += 4096;
        }
    }
    let used = allocations() - before;
    assert!(perf.page_walks > 0 && perf.l1d_load_misses > 0 && perf.l1i_load_misses > 0);
    assert_eq!(used, 0, "{used} allocations on the hot path");
}
