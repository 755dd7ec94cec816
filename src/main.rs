use std::alloc::{GlobalAlloc, Layout, System};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

// Reads build and drop many small JSON values on two threads; mimalloc makes the
// 2000-line compact read about 7% faster than the system allocator (BENCHMARKS.md). But
// mimalloc reserves its memory in arenas of at least 64 MiB (1 GiB for the first), and
// under a limit on the address space (`ulimit -v`) it fails allocations while the process
// uses a tenth of the limit. So a process started under such a limit uses the system
// allocator, whose reservations follow its use.
#[global_allocator]
static ALLOC: Alloc = Alloc;

/// Set (once, before `main` and before any allocation) when the address space is limited.
static USE_SYSTEM: AtomicBool = AtomicBool::new(false);

struct Alloc;

// mimalloc's own entry points (`mimalloc.h`, linked in with the allocator).
unsafe extern "C" {
    fn mi_is_in_heap_region(p: *const std::ffi::c_void) -> bool;
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

fn mimalloc_owns(ptr: *mut u8) -> bool {
    // SAFETY: a lookup of the address in mimalloc's region map; any pointer may be asked.
    unsafe { mi_is_in_heap_region(ptr.cast()) }
}

// SAFETY: every block is freed (and reallocated) by the allocator that made it: blocks are
// made by mimalloc until `USE_SYSTEM` is set, by the system allocator after; a free asks
// mimalloc whether the block is its own.
unsafe impl GlobalAlloc for Alloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if USE_SYSTEM.load(Ordering::Relaxed) {
            unsafe { System.alloc(layout) }
        } else {
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if USE_SYSTEM.load(Ordering::Relaxed) {
            unsafe { System.alloc_zeroed(layout) }
        } else {
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if USE_SYSTEM.load(Ordering::Relaxed) && !mimalloc_owns(ptr) {
            unsafe { System.dealloc(ptr, layout) }
        } else {
            unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !USE_SYSTEM.load(Ordering::Relaxed) {
            return unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) };
        }
        if !mimalloc_owns(ptr) {
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // A block made before the switch: moved to the system allocator.
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        let new = unsafe { System.alloc(new_layout) };
        if !new.is_null() {
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                mimalloc::MiMalloc.dealloc(ptr, layout);
            }
        }
        new
    }
}

/// Chooses the allocator before the first allocation: from `.init_array`, which runs
/// before Rust's runtime (which allocates before `main`). Under a limited address space:
/// the system allocator. Always: one glibc arena (glibc otherwise reserves 64 MiB of
/// address space for each thread that allocates, if only its thread-local storage), and
/// mimalloc arenas of 64 MiB instead of 1 GiB.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static CHOOSE_ALLOCATOR: extern "C" fn() = choose_allocator;

extern "C" fn choose_allocator() {
    // SAFETY: plain setters, called before any other thread exists and before mimalloc
    // reserves its first arena.
    unsafe {
        #[cfg(target_env = "gnu")]
        libc::mallopt(libc::M_ARENA_MAX, 1);
        mi_option_set(MI_OPTION_ARENA_RESERVE, 64 * 1024);
    }
    let limited = rustix::process::getrlimit(rustix::process::Resource::As)
        .current
        .is_some();
    USE_SYSTEM.store(limited, Ordering::Relaxed);
}

/// `mi_option_arena_reserve` in `mimalloc.h` (v2 and v3): the address space an arena
/// reserves, in KiB (1 GiB by default).
const MI_OPTION_ARENA_RESERVE: std::ffi::c_int = 23;

fn main() -> ExitCode {
    let config = evidence_store::cli::args::parse();
    match evidence_store::cli::app::run(config) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("evidence-store: {}", evidence_store::cli::chain_text(&err));
            ExitCode::FAILURE
        }
    }
}
