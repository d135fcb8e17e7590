//! A counting global allocator for the tests that check allocations or live bytes, and the
//! benches that report them (through `#[path]`). Counts are
//! per thread, so tests running in parallel in one binary do not disturb each other's figures
//! (each host under test is single-threaded). A test binary installs it with
//! `#[global_allocator] static GLOBAL: Counting = Counting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

pub struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count(bytes: isize, allocs: u64) {
    // `try_with`: a thread being torn down may still free memory.
    let _ = LIVE.try_with(|l| l.set(l.get() + bytes));
    let _ = ALLOCS.try_with(|a| a.set(a.get() + allocs));
}

// SAFETY: delegates to the system allocator with the caller's pointer and layout; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize, 1);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize), 0);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize, 1);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations (and reallocations) made by this thread so far.
pub fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

/// (live bytes, allocations) of this thread so far.
pub fn snapshot() -> (isize, u64) {
    (LIVE.with(Cell::get), ALLOCS.with(Cell::get))
}
