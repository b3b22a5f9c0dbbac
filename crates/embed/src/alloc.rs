//! Allocator settings for processes that embed. A forward pass allocates and frees tensors of
//! megabytes each; an allocator that gives those pages back to the kernel faults them in
//! again on the next pass (measured with perf: a fifth of the embedding time in
//! `clear_page` and page faults). The binaries that embed use mimalloc as their global
//! allocator and call [`keep_freed_pages`] first.

/// `mi_option_purge_delay` in mimalloc's `mi_option_t` (mimalloc.h, the same index in
/// versions 2 and 3; libmimalloc-sys names no constant for it): how long freed memory
/// waits before it is returned to the OS; -1 never returns it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Tells mimalloc to keep freed pages for reuse. Memory stays at the process's peak
/// (a few hundred megabytes for the model and one batch), which an indexer holds anyway.
pub fn keep_freed_pages() {
    // Safety: sets a process-wide allocator option; no memory is touched.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

/// The value mimalloc holds for the purge delay (for tests).
pub fn purge_delay() -> i64 {
    // Safety: reads a process-wide allocator option.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) as i64 }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_option_is_mimallocs_purge_delay() {
        // The bundled mimalloc 3's default purge delay is 1000 ms (options.c; 10 ms in
        // mimalloc 2): the index names the right option.
        assert!(
            [1000, 10].contains(&super::purge_delay()),
            "{}",
            super::purge_delay()
        );
        super::keep_freed_pages();
        assert_eq!(super::purge_delay(), -1);
    }
}
