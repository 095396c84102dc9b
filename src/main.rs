//! The `aicard` binary: its allocator, then `aicard::cli::run_binary` (the runtime, the command
//! line, the logs). Nothing generic is instantiated here, so the release build's binary step
//! has only the link-time optimisation left to do.

/// The hub allocates many small, short-lived buffers per frame across thousands of sockets;
/// mimalloc's per-thread free lists cost far less than glibc malloc there (see
/// docs/benchmarks.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's option numbers (`mi_option_e` in mimalloc 3's `mimalloc.h`; libmimalloc-sys
/// does not name them for v3). `allocator_options_are_the_documented_ones` checks their
/// defaults, so a renumbering in a new mimalloc fails a test instead of setting another knob.
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Idle tabs cost what they hold, not what the allocator keeps: memory freed after a frame
/// (the HTTP upgrade's buffers, a long prompt) goes back to the OS at once instead of after
/// mimalloc 3's default of 1 s, and arena memory is committed when used rather than up front. Measured: an
/// idle tab 7.3 → 6.0 KiB of RSS at 15,000 tabs, CPU per task unchanged within the noise
/// (docs/benchmarks.md). `MIMALLOC_PURGE_DELAY` / `MIMALLOC_ARENA_EAGER_COMMIT` in the
/// environment still win.
fn tune_allocator() {
    for (var, option, value) in [
        ("MIMALLOC_PURGE_DELAY", MI_OPTION_PURGE_DELAY, 0),
        (
            "MIMALLOC_ARENA_EAGER_COMMIT",
            MI_OPTION_ARENA_EAGER_COMMIT,
            0,
        ),
    ] {
        if std::env::var_os(var).is_none() {
            // SAFETY: called before `main`, while no other thread exists (the option
            // setters are not thread safe); the numbers are checked by a test.
            unsafe { libmimalloc_sys::mi_option_set(option, value) };
        }
    }
}

/// Runs `tune_allocator` from the ELF constructors, before Rust's runtime makes its first
/// allocation: mimalloc reserves its first arena on the first allocation, so an option set
/// in `main` would come too late for it.
#[cfg(all(target_os = "linux", not(test)))]
#[used]
#[link_section = ".init_array"]
static TUNE_ALLOCATOR: extern "C" fn() = {
    extern "C" fn tune() {
        tune_allocator();
    }
    tune
};

fn main() {
    #[cfg(not(all(target_os = "linux", not(test))))]
    tune_allocator();
    aicard::cli::run_binary();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocator_options_are_the_documented_ones() {
        // mimalloc 3's defaults: arena_eager_commit 2 ("on overcommit systems"), purge_delay
        // 1000 ms. Read before anything sets them (the test binary has no constructor, no `main`).
        if std::env::var_os("MIMALLOC_ARENA_EAGER_COMMIT").is_none() {
            assert_eq!(
                unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_ARENA_EAGER_COMMIT) },
                2
            );
        }
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(
                unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) },
                1000
            );
        }
    }
}
